"""Apache Fluss into Delta: the job against a hand-written copy of the same rows, in one run.

What it guards against: a job over Fluss whose protocol (planning, the snapshot lease, rounds,
fenced commits) costs much more than the copy it wraps. It starts a Fluss cluster of its own
(tiering/fluss/cluster.py, the jars of deploy/jars/fluss/pom.xml), loads a primary-key table of
``--rows`` rows over ``--buckets`` buckets, and times two halves of each of two steps:

- bootstrap: the rows of each bucket's latest KV snapshot (covering the whole load) into a new
  Delta table. BASELINE, by hand: the job's snapshot reader alone (:mod:`tiering.fluss.snapshot_arrow`:
  our JVM writer -> an Arrow IPC file -> mapped batches; only the JVM reads a snapshot's RocksDB
  files) -> one delta-rs ``write_deltalake``. Up to ``--py4j-max-rows``, beside it, Fluss's Java
  client row by row through py4j (``KvSnapshotBatchScanner`` -> pyarrow -> the same write), which
  reads ~500 rows/s.
- changelog: ``--updates`` updates of existing keys (a ``+U``, after a ``-U``, each) applied to
  that table. BASELINE, by hand: pyfluss's log scanner reads each bucket from the offset the
  snapshot covers to the log end -> pyarrow (the last change of each key) -> one delta-rs MERGE.

JOB (:class:`JobHalf`): availableNow runs of ``TieringJob`` with ``[kvstore] kind = "fluss"`` on
the same database in this process's Spark (warmed by one small run first): the first bootstraps
from the same snapshots, the second tiers the updates; a ratio per step (baseline s / job s, and
against the job's rounds alone). The job's lake must equal the hand-written copy's row by row (and
a sample of keys what was written), so a fast wrong job cannot score. Then the first commit of an
availableNow run over Fluss against the same over the reference store holding as many rows.

Each step also reports the CPU seconds its side spent (this process and every process below it:
the Spark JVM, its Python workers and their gateway JVMs, the planning process, the Fluss servers)
and the load average around it: the machine's 2 cores are shared, so a wall-time ratio taken under
load measures the load as much as the job; the CPU ratio does not.

``--bootstrap-only`` stops after the bootstrap step (no changelog, no reference store run).

Run: .venv/bin/python -m benchmarks.bench_fluss [--rows N] [--updates M] [--buckets B] [--bootstrap-only]
[--py4j-max-rows N] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from benchmarks.common import machine, write_json

DATABASE = "bench"
TABLE = "orders"
SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), ("note", pa.string()), ("amount", pa.float64()), ("day", pa.date32())]
)
#: rows written before one flush: pyfluss batches them itself, a flush waits for all
_LOAD_CHUNK = 100_000
_SNAPSHOT_WAIT_S = 600.0
_POLL_MS = 500
_SCAN_POLL_S = 5
_EPOCH_DAY = dt.date(1970, 1, 1)


def _row(key: int, salt: int) -> dict[str, Any]:
    return {
        "id": key,
        "note": f"n{key}-{salt}",
        "amount": key * 0.25 + salt,
        "day": _EPOCH_DAY + dt.timedelta(key % 20000),
    }


async def _load(servers: str, keys: range, salt: int, buckets: int) -> None:
    """``keys`` upserted through pyfluss (the table made on the first call); not timed."""
    import fluss

    connection = await fluss.FlussConnection.create(fluss.Config({"bootstrap.servers": servers}))
    try:
        admin, path = connection.get_admin(), fluss.TablePath(DATABASE, TABLE)
        if salt == 0:
            await admin.create_database(DATABASE, ignore_if_exists=True)
            schema = fluss.Schema(SCHEMA, primary_keys=["id"])
            await admin.create_table(path, fluss.TableDescriptor(schema, bucket_count=buckets))
        writer = (await connection.get_table(path)).new_upsert().create_writer()
        for start in range(keys.start, keys.stop, _LOAD_CHUNK):
            for key in range(start, min(start + _LOAD_CHUNK, keys.stop)):
                writer.upsert(_row(key, salt))
            await writer.flush()
    finally:
        await connection.close()


def tree_cpu_s(root: int | None = None) -> float:
    """CPU seconds (user and system) spent so far by process ``root`` (this one by default) and
    every process below it, those already reaped included (their parent's children's time)."""
    root = os.getpid() if root is None else root
    ticks = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    spent: dict[int, float] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        spent[pid] = sum(int(f) for f in fields[11:15]) / ticks  # utime stime cutime cstime
    return sum(cpu for pid, cpu in spent.items() if _below(pid, root, parents))


def _below(pid: int, root: int, parents: dict[int, int]) -> bool:
    while pid != root:
        if pid not in parents or parents[pid] in (0, pid):
            return False
        pid = parents[pid]
    return True


def _measured(step: Any, *args: Any) -> dict[str, Any]:
    """``step(*args)``'s figures with the CPU seconds it cost (:func:`tree_cpu_s`) and the
    1-minute load average before and after it."""
    load, cpu = os.getloadavg()[0], tree_cpu_s()
    figures = step(*args)
    return {**figures, "cpu_s": tree_cpu_s() - cpu, "load": [round(load, 1), round(os.getloadavg()[0], 1)]}


def _log_ends(store: Any) -> dict[int, int]:
    return {b: log.end for b, log in store.log_ends([TABLE])[TABLE].buckets.items()}


def _covering_snapshots(store: Any, ends: dict[int, int]) -> dict[int, Any]:
    """Each bucket's latest snapshot, once every one covers ``ends``."""
    deadline = time.monotonic() + _SNAPSHOT_WAIT_S
    while True:
        latest = store.latest_snapshots(TABLE)
        if all(b in latest and latest[b].log_offset >= end for b, end in ends.items() if end):
            return latest
        if time.monotonic() > deadline:
            raise RuntimeError(f"no snapshots covering {ends} in {_SNAPSHOT_WAIT_S:.0f} s: {latest}")
        time.sleep(0.5)


# the baseline: by hand


def baseline_bootstrap(java: Any, table_id: int, snapshots: dict[int, int], lake_dir: Path) -> dict[str, float]:
    """Each bucket's snapshot read by Fluss's Java client, row by row through py4j, into pyarrow;
    one delta-rs write. The read and the write timed apart."""
    from deltalake import write_deltalake

    started = time.perf_counter()
    fluss_table = java.connection.getTable(java.path(DATABASE, TABLE))
    getters = java.jvm.org.apache.fluss.row.InternalRow.createFieldGetters(fluss_table.getTableInfo().getRowType())
    columns: list[list[Any]] = [[] for _ in SCHEMA]
    try:
        for bucket, snapshot_id in snapshots.items():
            scanner = fluss_table.newScan().createBatchScanner(java.bucket(table_id, bucket), snapshot_id)
            try:
                while (batch := scanner.pollBatch(java.jvm.java.time.Duration.ofSeconds(_SCAN_POLL_S))) is not None:
                    while batch.hasNext():
                        row = batch.next()
                        for values, getter in zip(columns, getters, strict=True):
                            values.append(getter.getFieldOrNull(row))
                    batch.close()
            finally:
                scanner.close()
    finally:
        fluss_table.close()
    columns[1] = [None if v is None else v.toString() for v in columns[1]]  # BinaryString
    columns[3] = [None if v is None else _EPOCH_DAY + dt.timedelta(v) for v in columns[3]]  # days
    rows = pa.Table.from_arrays([pa.array(v, f.type) for v, f in zip(columns, SCHEMA, strict=True)], schema=SCHEMA)
    read_s = time.perf_counter() - started
    write_deltalake(str(lake_dir), rows)
    return {"rows": rows.num_rows, "read_s": read_s, "total_s": time.perf_counter() - started}


def arrow_bootstrap(store: Any, snapshots: dict[int, Any], lake_dir: Path) -> dict[str, float]:
    """Each bucket's snapshot read as Arrow by our JVM writer (the job's snapshot reader); the same
    delta-rs write. The read and the write timed apart."""
    from deltalake import write_deltalake

    from tiering.fluss.snapshot_arrow import snapshot_batches

    started = time.perf_counter()
    table = store.table(TABLE)
    batches = [batch for ref in snapshots.values() for batch in snapshot_batches(store.java, DATABASE, table, ref)]
    rows = pa.Table.from_batches(batches, table.arrow_schema)
    read_s = time.perf_counter() - started
    write_deltalake(str(lake_dir), rows)
    return {"rows": rows.num_rows, "read_s": read_s, "total_s": time.perf_counter() - started}


async def _changes(servers: str, starts: dict[int, int], ends: dict[int, int]) -> pa.Table:
    """Every bucket's records in [start, end) by pyfluss's log scanner, ``-U`` left out, as one
    table with the change kind (``__op``) and the offset order kept."""
    import fluss

    connection = await fluss.FlussConnection.create(fluss.Config({"bootstrap.servers": servers}))
    try:
        scanner = await (await connection.get_table(fluss.TablePath(DATABASE, TABLE))).new_scan().create_log_scanner()
        pending = {b: e for b, e in ends.items() if e > starts[b]}
        for bucket in pending:
            scanner.subscribe(bucket, starts[bucket])
        rows: list[dict[str, Any]] = []
        ops: list[str] = []
        reached = dict(starts)
        while any(reached[b] < e for b, e in pending.items()):
            for bucket, records in (await scanner.poll(_POLL_MS)).items():
                end = pending[bucket.bucket_id]
                for record in records:
                    kind = record.change_type.short_string()
                    if record.offset < end and kind != "-U":
                        rows.append(dict(record.row))
                        ops.append(kind)
                if records:
                    reached[bucket.bucket_id] = records[-1].offset + 1
    finally:
        await connection.close()
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    return table.append_column("__op", pa.array(ops, pa.string()))


def _last_per_key(changes: pa.Table) -> pa.Table:
    """The last change of each key (a key lives in one bucket, whose changes come in offset order)."""
    positions = changes.append_column("__at", pa.array(range(changes.num_rows), pa.int64()))
    last = positions.group_by("id").aggregate([("__at", "max")]).column("__at_max")
    return changes.take(last)


def baseline_changelog(servers: str, starts: dict[int, int], ends: dict[int, int], lake_dir: Path) -> dict[str, float]:
    """The buckets' changes read by pyfluss into pyarrow, one delta-rs MERGE on ``id``."""
    from deltalake import DeltaTable

    started = time.perf_counter()
    changes = _last_per_key(asyncio.run(_changes(servers, starts, ends)))
    read_s = time.perf_counter() - started
    merged = (
        DeltaTable(str(lake_dir))
        .merge(changes, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_delete(predicate="s.__op = '-D'")
        .when_matched_update(updates={name: f"s.{name}" for name in SCHEMA.names})
        .when_not_matched_insert(updates={name: f"s.{name}" for name in SCHEMA.names}, predicate="s.__op != '-D'")
        .execute()
    )
    return {"changes": changes.num_rows, "read_s": read_s, "total_s": time.perf_counter() - started, **_merged(merged)}


def _merged(metrics: dict[str, Any]) -> dict[str, int]:
    return {key: metrics[key] for key in ("num_target_rows_updated", "num_target_rows_inserted") if key in metrics}


# the job


def _first_commit_s(table_dir: Path, started: float) -> float:
    """Seconds from ``started`` (epoch s) to the commit that first put rows into ``table_dir``."""
    from deltalake import DeltaTable

    commits = sorted(DeltaTable(str(table_dir)).history(), key=lambda c: c["version"])
    first = next(c for c in commits if int(c.get("operationMetrics", {}).get("num_added_files", 1)))
    return first["timestamp"] / 1000 - started


class JobHalf:
    """The job's side: availableNow runs of ``TieringJob`` (``kind = "fluss"``) in this process's
    Spark, fluss-client on ``spark.jars``; entered, the session is made and warmed by one small
    run over a reference store, so that the timed runs pay no Python worker's start."""

    def __init__(self, work: Path, servers: str) -> None:
        from tests.support.fluss import client_jar

        self.work = work
        self.jars = {"spark.jars": str(client_jar())}
        self.fluss = {
            "kvstore.kind": "fluss",
            "kvstore.url": None,  # the reference store's, None: not given
            "kvstore.bootstrap_servers": servers,
            "kvstore.database": DATABASE,
            "tables.include": [TABLE],
            **{f"spark.{key}": value for key, value in self.jars.items()},
        }
        self.lake = work / "job-lake"

    def __enter__(self) -> JobHalf:
        from benchmarks.common import spark_session
        from tiering.kvstore.server.process import StoreProcess

        self.spark = spark_session(extra=self.jars)
        self.store = StoreProcess.start(self.work / "store", gc_interval_s=3600)
        try:
            self.reference("warm-up", 1000, 1)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.store.stop()
        self.spark.stop()

    def run(self, name: str, settings: dict[str, Any], table: str) -> dict[str, float]:
        """One availableNow run of job ``name``: its wall time, its rounds' time, its first commit's."""
        from benchmarks.common import run_service, service_config

        config = service_config(self.work, self.store.url, name, settings, root=str(self.lake / name))
        started = time.time()
        run = run_service(self.spark, config)
        return {
            "s": run.wall_s,
            "rounds_s": run.rounds_s,
            "first_commit_s": _first_commit_s(self.lake / name / table, started),
            "phases_ms": run.phases_ms,
        }

    def tier_fluss(self) -> dict[str, float]:
        """A run of the Fluss job: a bootstrap at its first, a changelog round after."""
        return self.run("fluss", self.fluss, TABLE)

    def reference(self, name: str, rows: int, buckets: int) -> dict[str, float]:
        """The same run over the reference store holding ``rows`` rows in one snapshot a bucket."""
        from benchmarks.common import load_table

        client = self.store.client(timeout_s=600)
        load_table(client, name, range(rows), buckets)
        client.take_snapshots(name)
        return self.run(f"ref-{name}", {"tables.include": [name]}, name)

    def lake_rows(self) -> pa.Table:
        return _user_rows(self.lake / "fluss" / TABLE)


def _user_rows(table_dir: Path) -> pa.Table:
    """A lake table's columns of :data:`SCHEMA`, in their types, sorted by key."""
    from deltalake import DeltaTable

    rows = DeltaTable(str(table_dir)).to_pyarrow_table(columns=SCHEMA.names)
    return pa.table([rows.column(f.name).cast(f.type) for f in SCHEMA], schema=SCHEMA).sort_by("id")


def check_lake(job: pa.Table, baseline: pa.Table, rows: int, updates: int) -> int:
    """The job's lake against the hand-written copy's (Fluss read by Fluss's clients), row by row,
    and a sample of keys against what was written; the rows compared."""
    if job.num_rows != rows or not job.equals(baseline):
        raise AssertionError(f"the job's lake ({job.num_rows} rows) is not the copy's ({baseline.num_rows}) of {rows}")
    for key in range(0, rows, max(1, rows // 1000)):
        got = job.slice(key, 1).to_pylist()[0]
        if got != _row(key, 1 if key < updates else 0):
            raise AssertionError(f"key {key}: the lake has {got}, Fluss was written {_row(key, int(key < updates))}")
    return job.num_rows


def _ratio(baseline_s: float, job_s: float) -> float:
    return round(baseline_s / job_s, 3)


def bench_fluss(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from tests.support.fluss import JARS_DIR, client_jar
    from tiering.fluss.cluster import FlussCluster
    from tiering.fluss.store import FlussStore

    if not 0 < args.updates <= args.rows:
        raise SystemExit(f"--updates {args.updates}: expected 1..--rows ({args.rows})")
    cluster = FlussCluster(JARS_DIR, buckets=args.buckets).start(work / "fluss")
    store = FlussStore(cluster.bootstrap_servers, DATABASE, client_jar())
    try:
        started = time.perf_counter()
        asyncio.run(_load(cluster.bootstrap_servers, range(args.rows), 0, args.buckets))
        load_s = time.perf_counter() - started
        ends = _log_ends(store)
        snapshots = _covering_snapshots(store, ends)
        table_id = next(iter(snapshots.values())).table_id
        arrow = _measured(arrow_bootstrap, store, snapshots, work / "lake")
        assert arrow["rows"] == args.rows, (arrow["rows"], args.rows)
        boot = None
        if args.rows <= args.py4j_max_rows:
            refs = {b: s.snapshot_id for b, s in snapshots.items()}
            boot = baseline_bootstrap(store.java, table_id, refs, work / "lake-py4j")
            assert boot["rows"] == args.rows, (boot["rows"], args.rows)
        with JobHalf(work, cluster.bootstrap_servers) as job:
            job_boot = _measured(job.tier_fluss)
            report = _bootstrap_report(args, load_s, boot, arrow, job_boot)
            if args.bootstrap_only:
                return report
            reference = job.reference("ref", args.rows, args.buckets)

            asyncio.run(_load(cluster.bootstrap_servers, range(args.updates), 1, args.buckets))
            starts = {b: s.log_offset for b, s in snapshots.items()}
            round_ = _measured(baseline_changelog, cluster.bootstrap_servers, starts, _log_ends(store), work / "lake")
            assert round_["changes"] == args.updates, (round_["changes"], args.updates)
            job_round = _measured(job.tier_fluss)
            checked = check_lake(job.lake_rows(), _user_rows(work / "lake"), args.rows, args.updates)
    finally:
        store.close()
        cluster.stop()
    return {
        **report,
        "updates": args.updates,
        "baseline_changelog": "pyfluss-pyarrow-delta-rs-merge",
        "baseline_changelog_s": round(round_["total_s"], 3),
        "baseline_changelog_read_s": round(round_["read_s"], 3),
        "baseline_changelog_rows_per_s": round(args.updates / round_["total_s"]),
        "baseline_merge": {k: v for k, v in round_.items() if k.startswith("num_")},
        "job_changelog_s": round(job_round["s"], 3),
        "job_changelog_round_s": round(job_round["rounds_s"], 3),
        "job_changelog_phases_ms": job_round["phases_ms"],
        "changelog_ratio": _ratio(round_["total_s"], job_round["s"]),
        "changelog_round_ratio": _ratio(round_["total_s"], job_round["rounds_s"]),
        **_cpu_report("changelog", round_, job_round),
        "lake_rows_checked": checked,
        "first_commit": "availableNow run, same rows: Fluss (KV snapshots) vs the reference store",
        "first_commit_fluss_s": round(job_boot["first_commit_s"], 3),
        "first_commit_reference_s": round(reference["first_commit_s"], 3),
        "first_commit_reference_phases_ms": reference["phases_ms"],
        "first_commit_ratio": _ratio(reference["first_commit_s"], job_boot["first_commit_s"]),
    }


def _bootstrap_report(
    args: argparse.Namespace,
    load_s: float,
    boot: dict[str, float] | None,
    arrow: dict[str, float],
    job: dict[str, float],
) -> dict[str, Any]:
    py4j = (
        {
            "py4j_bootstrap": "fluss-java-client(py4j)-pyarrow-delta-rs",
            "py4j_bootstrap_s": round(boot["total_s"], 3),
            "py4j_bootstrap_read_s": round(boot["read_s"], 3),
            "py4j_bootstrap_rows_per_s": round(args.rows / boot["total_s"]),
        }
        if boot is not None
        else {"py4j_bootstrap": f"not run: {args.rows} rows > --py4j-max-rows {args.py4j_max_rows}"}
    )
    return {
        "rows": args.rows,
        "buckets": args.buckets,
        "load_rows_per_s": round(args.rows / load_s),
        "baseline_bootstrap": "arrow-snapshot-writer(jvm)-ipc-file-pyarrow-delta-rs",
        "baseline_bootstrap_s": round(arrow["total_s"], 3),
        "baseline_bootstrap_read_s": round(arrow["read_s"], 3),
        "baseline_bootstrap_rows_per_s": round(args.rows / arrow["total_s"]),
        **py4j,
        "job": "availableNow TieringJob, kvstore.kind = fluss, in-process local[2]",
        "job_bootstrap_s": round(job["s"], 3),
        "job_bootstrap_round_s": round(job["rounds_s"], 3),
        "job_bootstrap_phases_ms": job["phases_ms"],
        "job_bootstrap_rows_per_s": round(args.rows / job["s"]),
        "bootstrap_ratio": _ratio(arrow["total_s"], job["s"]),
        "bootstrap_round_ratio": _ratio(arrow["total_s"], job["rounds_s"]),
        **_cpu_report("bootstrap", arrow, job),
    }


def _cpu_report(step: str, baseline: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    """A step's CPU seconds a side, their ratio (baseline / job), and the load around each side."""
    return {
        f"baseline_{step}_cpu_s": round(baseline["cpu_s"], 2),
        f"job_{step}_cpu_s": round(job["cpu_s"], 2),
        f"{step}_cpu_ratio": _ratio(baseline["cpu_s"], job["cpu_s"]),
        f"{step}_load": {"baseline": baseline["load"], "job": job["load"]},
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_fluss", description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000, help="rows bootstrapped from a snapshot")
    parser.add_argument("--updates", type=int, default=1_000_000, help="updates in the changelog round")
    parser.add_argument("--buckets", type=int, default=4)
    parser.add_argument("--bootstrap-only", action="store_true", help="stop after the bootstrap step")
    parser.add_argument(
        "--py4j-max-rows",
        type=int,
        default=200_000,
        help="the py4j row-by-row bootstrap copy runs up to this many rows (~500 rows/s)",
    )
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/fluss.json"))
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-fluss-"))
    try:
        report = {"benchmark": "fluss", **bench_fluss(args, work), **machine()}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(write_json(args.out, report))
    return report


if __name__ == "__main__":
    main()
