"""Apache Fluss into Delta: the job against a hand-written copy of the same rows, in one run.

What it guards against: a job over Fluss whose protocol (planning, the snapshot lease, rounds,
fenced commits) costs much more than the copy it wraps. It starts a Fluss cluster of its own
(tiering/fluss/cluster.py, the jars of deploy/jars/fluss/pom.xml), loads a primary-key table of
``--rows`` rows over ``--buckets`` buckets, and times two halves of each of two steps:

- bootstrap: the rows of each bucket's latest KV snapshot (covering the whole load) into a new
  Delta table. BASELINE, by hand: Fluss's Java client (``KvSnapshotBatchScanner``, through py4j:
  only the JVM reads a snapshot's RocksDB files) -> pyarrow -> one delta-rs ``write_deltalake``.
  ARROW, beside it on the same snapshots: the job's reader (:mod:`tiering.fluss.snapshot_arrow`:
  our JVM writer -> an Arrow IPC file -> mapped batches) -> the same delta-rs write.
- changelog: ``--updates`` updates of existing keys (a ``+U``, after a ``-U``, each) applied to
  that table. BASELINE, by hand: pyfluss's log scanner reads each bucket from the offset the
  snapshot covers to the log end -> pyarrow (the last change of each key) -> one delta-rs MERGE.

JOB (:func:`job_half`): an availableNow run of the tiering job with ``[kvstore] kind = "fluss"`` on
the same database, timed against the same steps, a ratio per step (baseline s / job s). While the
job refuses that config, the report says "not yet" with the config's own words and the run ends
well (exit 0): the baseline's figures stand alone.

``--bootstrap-only`` stops after the bootstrap step (no changelog, no job).

Run: .venv/bin/python -m benchmarks.bench_fluss [--rows N] [--updates M] [--buckets B] [--bootstrap-only]
[--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
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
#: the reference store's url, unused with kind = "fluss"
_NO_STORE = "http://127.0.0.1:1"


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


def job_half(work: Path, servers: str) -> dict[str, Any]:
    """HOOK: the job's side, an availableNow run of ``tiering`` with kind = "fluss" over the
    database; its config refused means the job does not tier Fluss yet, said as such."""
    from benchmarks.common import service_config
    from tiering.errors import ConfigError

    settings = {"kvstore.kind": "fluss", "kvstore.bootstrap_servers": servers, "kvstore.database": DATABASE}
    try:
        config = service_config(work, _NO_STORE, "bench-fluss", {**settings, "tables.include": [TABLE]})
    except ConfigError as e:
        return {"job": f"not yet: the job does not tier Fluss ({e.problems[0] if e.problems else e})"}
    from benchmarks.common import run_service, spark_session

    spark = spark_session()
    try:
        run = run_service(spark, config)
    finally:
        spark.stop()
    return {"job": "ran", "job_s": round(run.wall_s, 3), "job_rounds_s": round(run.rounds_s, 3), "config": str(config)}


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
        arrow = arrow_bootstrap(store, snapshots, work / "lake-arrow")
        assert arrow["rows"] == args.rows, (arrow["rows"], args.rows)
        boot = baseline_bootstrap(store.java, table_id, {b: s.snapshot_id for b, s in snapshots.items()}, work / "lake")
        assert boot["rows"] == args.rows, (boot["rows"], args.rows)
        if args.bootstrap_only:
            return _bootstrap_report(args, load_s, boot, arrow)

        asyncio.run(_load(cluster.bootstrap_servers, range(args.updates), 1, args.buckets))
        starts = {b: s.log_offset for b, s in snapshots.items()}
        round_ = baseline_changelog(cluster.bootstrap_servers, starts, _log_ends(store), work / "lake")
        assert round_["changes"] == args.updates, (round_["changes"], args.updates)
        job = job_half(work, cluster.bootstrap_servers)
    finally:
        store.close()
        cluster.stop()
    return {
        **_bootstrap_report(args, load_s, boot, arrow),
        "updates": args.updates,
        "baseline_changelog": "pyfluss-pyarrow-delta-rs-merge",
        "baseline_changelog_s": round(round_["total_s"], 3),
        "baseline_changelog_read_s": round(round_["read_s"], 3),
        "baseline_changelog_rows_per_s": round(args.updates / round_["total_s"]),
        "baseline_merge": {k: v for k, v in round_.items() if k.startswith("num_")},
        **job,
    }


def _bootstrap_report(
    args: argparse.Namespace, load_s: float, boot: dict[str, float], arrow: dict[str, float]
) -> dict[str, Any]:
    return {
        "rows": args.rows,
        "buckets": args.buckets,
        "load_rows_per_s": round(args.rows / load_s),
        "baseline_bootstrap": "fluss-java-client(py4j)-pyarrow-delta-rs",
        "baseline_bootstrap_s": round(boot["total_s"], 3),
        "baseline_bootstrap_read_s": round(boot["read_s"], 3),
        "baseline_bootstrap_rows_per_s": round(args.rows / boot["total_s"]),
        "baseline_bootstrap_read_rows_per_s": round(args.rows / boot["read_s"]),
        "arrow_bootstrap": "arrow-snapshot-writer(jvm)-ipc-file-pyarrow-delta-rs",
        "arrow_bootstrap_s": round(arrow["total_s"], 3),
        "arrow_bootstrap_read_s": round(arrow["read_s"], 3),
        "arrow_bootstrap_rows_per_s": round(args.rows / arrow["total_s"]),
        "arrow_bootstrap_read_rows_per_s": round(args.rows / arrow["read_s"]),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_fluss", description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000, help="rows bootstrapped from a snapshot")
    parser.add_argument("--updates", type=int, default=1_000_000, help="updates in the changelog round")
    parser.add_argument("--buckets", type=int, default=4)
    parser.add_argument("--bootstrap-only", action="store_true", help="stop after the bootstrap step")
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
