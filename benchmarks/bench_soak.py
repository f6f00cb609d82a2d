"""Soak: months of continuous tiering squeezed into minutes — does anything grow with the rounds?

What it guards against: a service that is fast for its first rounds and then slows down or
fills up because something accumulates per round — data files per bucket (no compaction), the
``_delta_log`` (no checkpoints, no cleanup), the time to open or read a table (log replay over
every commit), driver memory (Python or its JVM), the round itself. Not part of the test suite
(it runs for minutes and its figures are timings on a shared machine).

The real job on real services: an embedded ZooKeeper, the reference store as its own process,
a local Delta lake, and ``tiering.job.run_as_leader`` (election, epoch, the leader's lake
maintenance every ``--maintenance-every`` rounds) with a short trigger interval. A steady writer
upserts and deletes across ``--tables`` tables, and every ``--schema-every`` rounds appends a
nullable column to one of them (round-robin) and then writes values into it. The lake is
measured after ``--warmup`` rounds (start) and after ``--rounds`` rounds (end), each figure gets
an end/start ratio and a ``bounded`` verdict, and, once the writer stopped and the lake caught
up, every table is compared with the store row by row (``tiering.ops.verify.check_table``); the
exit code is non-zero when any table differs.

What cannot stay bounded within a soak, by configuration: the ``_delta_log`` (entries are
deleted only when older than ``maintenance.log_retention_hours``, at least 1 h) and data files
no version references any more (deleted only when unreferenced for
``maintenance.file_retention_hours``, at least 24 h). Both are reported, marked as expected to
grow; what must stay bounded is what the checkpoints and the compaction are for.

Run: .venv/bin/python -m benchmarks.bench_soak [--quick] [--rounds 1000] [--tables 20] [--no-schema-changes]
Writes benchmarks/results/soak.json (``--out``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
from pyspark.sql.streaming import StreamingQueryListener

from benchmarks.common import RESULTS, Worker, jvm_pid, load_table, machine, service_config, spark_session, write_json
from benchmarks.rss import peak_rss_mb, rss_mb
from tiering.errors import one_line

JOB = "soak"
#: the types of the columns the writer appends, in turn, with the value it writes into each
COLUMN_TYPES: dict[str, Callable[[int], object]] = {
    "string": lambda n: f"v{n}",
    "bigint": lambda n: n,
    "double": lambda n: n / 4,
    "int": lambda n: n % 1000,
}


class Rounds:
    """The job's rounds as the benchmark sees them: how many ended and which tables failed (the
    job's round listener), and each round's wall time (Spark's ``triggerExecution``, from
    :class:`_BatchTimes`: the time includes a maintenance pass, which runs inside the round)."""

    def __init__(self) -> None:
        self.count = 0
        self.failures: list[dict] = []
        self.times_ms: list[float] = []

    def on_round(self, outcome) -> None:
        self.count += 1
        self.failures += [{"round": outcome.round_id, "table": t, "error": e[:300]} for t, e in outcome.failed.items()]


class _BatchTimes(StreamingQueryListener):
    """Spark's listener bus calls this for every trigger; only batches that carried a round count."""

    def __init__(self, rounds: Rounds) -> None:
        self._rounds = rounds

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        progress = event.progress
        if progress.name == f"kv-tiering:{JOB}" and "addBatch" in progress.durationMs:
            self._rounds.times_ms.append(float(progress.durationMs["triggerExecution"]))

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass


class LeaderThread(Worker):
    """``run_as_leader``, the path of `tiering run`: election, term, query, maintenance."""

    def __init__(self, config, on_round: Callable) -> None:
        super().__init__("soak-leader")
        self.config = config
        self.on_round = on_round

    def work(self) -> None:
        from tiering.job import run_as_leader

        run_as_leader(self.config, stop=self.stopping, listeners=[self.on_round])


class SteadyWriter(Worker):
    """Upserts and deletes spread over the tables at a steady rate and, when ``schema_every`` is
    set, an appended nullable column every ``schema_every`` rounds (``rounds()``), one table after
    the other; the writes that follow fill the new columns too, so the lake must carry them."""

    TICK_S = 0.1

    def __init__(
        self, client, tables: list[str], keys: int, rate: int, rounds: Callable[[], int], schema_every: int | None
    ) -> None:
        super().__init__("soak-writer")
        self.client = client
        self.tables = tables
        self.keys = keys
        self.per_tick = max(1, round(rate * self.TICK_S))
        self.rounds = rounds
        self.schema_every = schema_every
        self.columns: dict[str, list[tuple[str, str]]] = {t: [] for t in tables}
        self.schema_changes: list[dict] = []
        self.upserts = self.deletes = 0

    def work(self) -> None:
        rng = random.Random(11)
        while not self.stopping.wait(self.TICK_S):
            if self.schema_every and self.rounds() // self.schema_every > len(self.schema_changes):
                self._add_column()
            table, salt = rng.choice(self.tables), self.upserts
            self.client.upsert(table, [self._row(table, i, salt) for i in rng.sample(range(self.keys), self.per_tick)])
            gone = rng.sample(range(self.keys), max(1, self.per_tick // 5))
            self.client.delete(table, [{"id": i} for i in gone])
            self.upserts += self.per_tick
            self.deletes += len(gone)

    def _add_column(self) -> None:
        n = len(self.schema_changes)
        table, kind = self.tables[n % len(self.tables)], list(COLUMN_TYPES)[n % len(COLUMN_TYPES)]
        column = f"extra_{n}"
        self.client.add_column(table, column, kind)
        self.columns[table].append((column, kind))
        self.schema_changes.append({"round": self.rounds(), "table": table, "column": column, "type": kind})

    def _row(self, table: str, key: int, salt: int) -> dict:
        extra = {column: COLUMN_TYPES[kind](key + salt) for column, kind in self.columns[table]}
        return {"id": key, "name": f"n{salt}-{key}", "qty": (key + salt) % 1024, "price": key * 0.01 + salt, **extra}


def table_figures(path: Path) -> dict:
    """One table as a reader finds it: the open (log replay) with delta-rs and the full read as
    the job reads it (:func:`tests.support.lake.delta_rows`), data files per bucket, files on
    disk no version references, and the ``_delta_log``."""
    from deltalake import DeltaTable

    from tests.support.lake import delta_rows
    from tiering.delta_log.layout import BUCKET_COLUMN

    started = time.perf_counter()
    dt = DeltaTable(str(path))
    open_s = time.perf_counter() - started
    started = time.perf_counter()
    rows = delta_rows(dt).num_rows
    read_s = time.perf_counter() - started
    actions = pa.table(dt.get_add_actions(flatten=True))
    per_bucket = Counter(actions.column(f"partition.{BUCKET_COLUMN}").to_pylist())
    log_dir = path / "_delta_log"
    log = [e for e in os.scandir(log_dir) if e.is_file()]
    last = log_dir / "_last_checkpoint"
    checkpoint = json.loads(last.read_text())["version"] if last.exists() else -1
    commits = [int(e.name[:20]) for e in log if e.name.endswith(".json") and e.name[:20].isdigit()]
    newest_checkpoint = sum(e.stat().st_size for e in log if e.name.startswith(f"{checkpoint:020d}.checkpoint"))
    on_disk = sum(1 for p in path.rglob("*.parquet") if "_delta_log" not in p.parts)
    return {
        "version": dt.version(),
        "rows": rows,
        "open_s": open_s,
        "read_s": read_s,
        "files_per_bucket_mean": statistics.mean(per_bucket.values()),
        "files_per_bucket_max": max(per_bucket.values()),
        "unreferenced_files": on_disk - actions.num_rows,
        "delta_log_bytes": sum(e.stat().st_size for e in log),
        "delta_log_files": len(log),
        "log_commits_after_checkpoint": sum(1 for v in commits if v > checkpoint),
        "checkpoint_bytes": newest_checkpoint,
    }


def lake_figures(lake, tables: list[str], round_count: int, pids: dict[str, int | None]) -> dict:
    """The lake over all tables (mean and max of each table's figure) and the driver's memory now."""
    per_table = [table_figures(Path(lake.path(t))) for t in tables]

    def spread(key: str, digits: int = 1) -> dict:
        values = [t[key] for t in per_table]
        return {"mean": round(statistics.mean(values), digits), "max": round(max(values), digits)}

    return {
        "round": round_count,
        "files_per_bucket": {
            "mean": spread("files_per_bucket_mean")["mean"],
            "max": spread("files_per_bucket_max")["max"],
        },
        "unreferenced_files_per_table": spread("unreferenced_files"),
        "delta_log_bytes_per_table": spread("delta_log_bytes", 0),
        "delta_log_files_per_table": spread("delta_log_files"),
        "log_commits_after_checkpoint_per_table": spread("log_commits_after_checkpoint"),
        "newest_checkpoint_bytes_per_table": spread("checkpoint_bytes", 0),
        "delta_version_per_table": spread("version"),
        "rows_per_table": spread("rows"),
        "open_ms_mean": round(1000 * statistics.mean(t["open_s"] for t in per_table), 2),
        "read_ms_mean": round(1000 * statistics.mean(t["read_s"] for t in per_table), 2),
        **{f"{name}_rss_mb": rss_mb(pid) if pid else None for name, pid in pids.items()},
    }


def percentiles(times_ms: list[float]) -> dict:
    """p50/p99 by nearest rank (of 100 rounds, p99 is the second slowest) and the max."""
    ordered = sorted(times_ms)

    def rank(q: float) -> float:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]

    return {"rounds": len(ordered), "p50_ms": rank(0.5), "p99_ms": rank(0.99), "max_ms": ordered[-1]}


#: figure -> (where it is in the figures, whether it must stay bounded, why)
VERDICTS: dict[str, tuple[Callable[[dict], float | None], bool, str]] = {
    "files_per_bucket_max": (
        lambda f: f["files_per_bucket"]["max"],
        True,
        "compaction merges a bucket's small files once it has maintenance.min_files of them",
    ),
    "files_per_bucket_mean": (lambda f: f["files_per_bucket"]["mean"], True, "as files_per_bucket_max"),
    "log_commits_after_checkpoint_max": (
        lambda f: f["log_commits_after_checkpoint_per_table"]["max"],
        True,
        "a checkpoint every maintenance.checkpoint_interval commits",
    ),
    "open_ms_mean": (
        lambda f: f["open_ms_mean"],
        True,
        "log replay starts at the newest checkpoint (a saw-tooth over checkpoint_interval commits)",
    ),
    "read_ms_mean": (lambda f: f["read_ms_mean"], True, "as many files and rows as at the start"),
    "driver_python_rss_mb": (lambda f: f["driver_python_rss_mb"], True, "nothing the driver keeps grows per round"),
    "driver_jvm_rss_mb": (lambda f: f["driver_jvm_rss_mb"], True, "nothing the driver keeps grows per round"),
    "round_p50_ms": (
        lambda f: f["round_time"]["p50_ms"],
        True,
        "a round's work depends on its changes, not on the rounds before",
    ),
    "round_p99_ms": (lambda f: f["round_time"]["p99_ms"], True, "as round_p50_ms; includes maintenance passes"),
    "newest_checkpoint_bytes_mean": (
        lambda f: f["newest_checkpoint_bytes_per_table"]["mean"],
        False,
        "a checkpoint keeps the remove tombstones of delta.deletedFileRetentionDuration "
        "(default 1 week): every replaced file of the soak",
    ),
    "delta_log_bytes_mean": (
        lambda f: f["delta_log_bytes_per_table"]["mean"],
        False,
        "log entries are deleted only after maintenance.log_retention_hours (at least 1 h)",
    ),
    "delta_log_files_mean": (lambda f: f["delta_log_files_per_table"]["mean"], False, "as delta_log_bytes_mean"),
    "unreferenced_files_mean": (
        lambda f: f["unreferenced_files_per_table"]["mean"],
        False,
        "vacuum deletes only files unreferenced for file_retention_hours (at least 24 h)",
    ),
}


def verdicts(start: dict, end: dict, limit: float, ceilings: dict[str, float]) -> dict:
    """Per figure: start, end, end/start, and whether it stayed bounded: at most its ceiling when
    the configuration sets one (a saw-tooth figure, whose start may fall low in its cycle), else
    an end/start ratio of at most ``limit``."""
    out = {}
    for name, (figure, must, why) in VERDICTS.items():
        a, b = figure(start), figure(end)
        ratio = round(b / a, 2) if a and b is not None else None
        ceiling = ceilings.get(name)
        bounded = b is not None and b <= ceiling if ceiling is not None else ratio is not None and ratio <= limit
        out[name] = {
            "start": a,
            "end": b,
            "end_over_start": ratio,
            **({"ceiling": ceiling} if ceiling else {}),
            "must_stay_bounded": must,
            "bounded": bounded,
            "why": why,
        }
    return out


def maintenance_done(lake, tables: list[str]) -> dict:
    """What the leader's maintenance passes committed, from the tables' Delta history."""
    from deltalake import DeltaTable

    operations: Counter[str] = Counter()
    vacuumed = 0
    for table in tables:
        for commit in DeltaTable(lake.path(table)).history():
            operations[commit.get("operation", "?")] += 1
            if commit.get("operation") == "VACUUM END":
                vacuumed += int(commit.get("operationMetrics", {}).get("numDeletedFiles", 0))
    return {"delta_operations": dict(sorted(operations.items())), "files_vacuumed": vacuumed}


def caught_up(client, lake, tables: list[str]) -> bool:
    """Whether the lake reached the store's log end in every bucket of every table."""
    for table in tables:
        position = lake.position(table, client.get_table(table).table_id)
        reached = position.buckets if position is not None else {}
        if any(reached.get(b.bucket, 0) < b.log_end_offset for b in client.log_info(table).buckets):
            return False
    return True


def soak(args, work: Path) -> dict:
    from tiering.coord.embedded import EmbeddedZooKeeper
    from tiering.delta_log.lake import Lake
    from tiering.kvstore.server.process import StoreProcess
    from tiering.ops.verify import check_table

    tables = [f"soak_{i:03d}" for i in range(args.tables)]
    rounds = Rounds()
    with contextlib.ExitStack() as stack:
        zk = stack.enter_context(EmbeddedZooKeeper(log_level="WARN")).start(work / "zookeeper")
        store = StoreProcess.start(work / "store", gc_interval_s=60)
        stack.callback(store.stop)
        client = store.client(timeout_s=120)
        for table in tables:
            load_table(client, table, range(args.keys // 2), args.buckets)
            client.take_snapshots(table)
        spark = spark_session()
        stack.callback(spark.stop)
        spark.streams.addListener(_BatchTimes(rounds))
        pids = {"driver_python": os.getpid(), "driver_jvm": jvm_pid(spark)}
        config = service_config(
            work,
            store.url,
            JOB,
            {
                "zookeeper.hosts": zk.hosts,
                "trigger.available_now": False,
                "trigger.interval_s": args.interval,
                "maintenance.enabled": True,
                "maintenance.every_rounds": args.maintenance_every,
                "maintenance.checkpoint_interval": args.checkpoint_interval,
            },
        )
        lake = Lake.of(config.lake)
        started = time.monotonic()
        job = stack.enter_context(LeaderThread(config, rounds.on_round))
        writer = stack.enter_context(
            SteadyWriter(
                client,
                tables,
                args.keys,
                args.rate,
                lambda: rounds.count,
                args.schema_every if args.schema_changes else None,
            )
        )

        def reach(target: int) -> None:
            """Wait for ``target`` rounds; fail at once when the job or the writer died, or stalled."""
            last, last_at, reported = rounds.count, time.monotonic(), rounds.count
            while rounds.count < target:
                for part in (job, writer):
                    if part.error is not None:
                        raise RuntimeError(f"soak: {part.name} failed: {one_line(part.error)}") from part.error
                if rounds.count != last:
                    last, last_at = rounds.count, time.monotonic()
                elif time.monotonic() - last_at > args.stall_s:
                    raise RuntimeError(f"soak: no round for {args.stall_s:.0f}s (at round {last})")
                if rounds.count - reported >= args.progress_every:
                    reported = rounds.count
                    recent = rounds.times_ms[-args.progress_every :] or [0.0]
                    print(
                        f"soak: round {rounds.count}/{args.rounds} at {time.monotonic() - started:.0f}s, "
                        f"recent round p50 {statistics.median(recent):.0f} ms",
                        file=sys.stderr,
                        flush=True,
                    )
                time.sleep(0.2)

        reach(args.warmup)
        start = lake_figures(lake, tables, rounds.count, pids)
        reach(args.rounds)
        end = lake_figures(lake, tables, rounds.count, pids)
        soak_s = time.monotonic() - started
        times = list(rounds.times_ms)
        window = min(100, (len(times) - args.warmup) // 2)
        start["round_time"] = percentiles(times[args.warmup : args.warmup + window])
        end["round_time"] = percentiles(times[-window:])
        writer.stop()
        deadline = time.monotonic() + args.catch_up_s
        while not (done := caught_up(client, lake, tables)) and time.monotonic() < deadline and job.error is None:
            time.sleep(0.5)
        job.stop()
        if job.error is not None:
            raise RuntimeError(f"soak: the job failed: {one_line(job.error)}") from job.error
        checks = [check_table(client, lake, client.get_table(t)) for t in tables]
        peaks = {f"{name}_peak_rss_mb": peak_rss_mb(pid) if pid else None for name, pid in pids.items()}
        maintenance = maintenance_done(lake, tables)
    return {
        "soak_s": round(soak_s, 1),
        "rounds_done": rounds.count,
        "rounds_per_s": round(rounds.count / soak_s, 2),
        "round_time_window": window,
        "start": start,
        "end": end,
        "bounded": verdicts(
            start, end, args.bound_ratio, {"log_commits_after_checkpoint_max": args.checkpoint_interval}
        ),
        "peaks": peaks,
        "maintenance": {
            **maintenance,
            "file_retention_hours": config.maintenance.file_retention_hours,
            "log_retention_hours": config.maintenance.log_retention_hours,
        },
        "writer": {
            "upserted_rows": writer.upserts,
            "deleted_keys": writer.deletes,
            "schema_changes": writer.schema_changes,
        },
        "failed_table_rounds": len(rounds.failures),
        "failures_first": rounds.failures[:10],
        "verify": {
            "caught_up": done,
            "equal": done and all(c.equal for c in checks),
            "tables": [asdict(c) | {"equal": c.equal} for c in checks],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="60 rounds of 5 tables, warm-up 10 (a smoke run)")
    parser.add_argument("--rounds", type=int, default=1000, help="rounds to run (the end figures are taken here)")
    parser.add_argument("--tables", type=int, default=20)
    parser.add_argument("--buckets", type=int, default=4, help="buckets per table")
    parser.add_argument("--keys", type=int, default=2000, help="key space per table (half of it loaded at the start)")
    parser.add_argument(
        "--rate", type=int, default=100, help="rows upserted per second over all tables (a fifth as many deletes)"
    )
    parser.add_argument("--interval", type=float, default=0.3, help="trigger.interval_s of the job")
    parser.add_argument("--maintenance-every", type=int, default=10, help="maintenance.every_rounds of the job")
    parser.add_argument(
        "--checkpoint-interval",
        type=int,
        default=20,
        help="maintenance.checkpoint_interval of the job (its default, 20)",
    )
    parser.add_argument(
        "--schema-changes",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="append a nullable column upstream every --schema-every rounds",
    )
    parser.add_argument("--schema-every", type=int, default=25)
    parser.add_argument("--warmup", type=int, default=20, help="the round at which the start figures are taken")
    parser.add_argument("--bound-ratio", type=float, default=2.0, help="end/start above this is not bounded")
    parser.add_argument("--stall-s", type=float, default=120.0, help="fail when no round ends for this long")
    parser.add_argument(
        "--catch-up-s", type=float, default=180.0, help="time the lake has to reach the store's log end"
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "soak.json")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.tables, args.warmup = 60, 5, 10
    if args.rounds < args.warmup + 20:
        parser.error(f"--rounds must be at least --warmup + 20 ({args.warmup + 20})")
    args.progress_every = max(10, args.rounds // 10)

    load_before = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="bench-soak-"))
    try:
        figures = soak(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "benchmark": "soak",
        "parameters": {
            "rounds": args.rounds,
            "warmup_round": args.warmup,
            "tables": args.tables,
            "buckets_per_table": args.buckets,
            "keys_per_table": args.keys,
            "writer_rows_per_s": args.rate,
            "trigger_interval_s": args.interval,
            "maintenance_every_rounds": args.maintenance_every,
            "checkpoint_interval": args.checkpoint_interval,
            "schema_every_rounds": args.schema_every if args.schema_changes else None,
            "bound_ratio": args.bound_ratio,
        },
        "machine": {
            **machine(),
            "load_avg_1m_before": round(load_before, 2),
            "load_avg_1m_after": round(os.getloadavg()[0], 2),
        },
        **figures,
    }
    print(write_json(args.out, result))
    if not figures["verify"]["equal"]:
        differ = [t["table"] for t in figures["verify"]["tables"] if not t["equal"]]
        raise SystemExit(
            f"soak: the lake differs from the store (caught up: {figures['verify']['caught_up']}): {differ}"
        )


if __name__ == "__main__":
    main()
