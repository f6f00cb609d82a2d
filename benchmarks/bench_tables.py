"""``tables`` mode: one job over many tables: does a round's cost follow the tables that changed?

``--counts 10,50,200`` (up to 1,000 and 10,000): per count, that many tables of 4 buckets,
tiered once (``bootstrap_s``); then a continuous job over them with nothing changing, in a
driver process of its own: its first trigger (every table's lake read once), the empty rounds
after it (p50, max) and the peak RSS of the driver's Python and JVM meanwhile; then (counts up
to ``--changed-max``) a few rows changed in every table between two triggers of a running job,
twice: the wall time of the second round that tiers them all (``triggerExecution``, Spark's
breakdown; the term's first is ``first_round_ms``), per table, and the bytes of the offsets
entry Spark wrote for it. ``--lake s3`` puts the lake on an embedded S3 server, and
``--s3-latency-ms N`` every request to it N ms away (a proxy process in front of it: loopback
answers in well under a millisecond, S3 in tens, and a round's requests wait one after another
where nothing runs them side by side); ``--table-parallelism N`` sets ``lake.table_parallelism``.

Run: .venv/bin/python -m benchmarks.bench_tiering tables [--counts 10,50,200] [--changed-max N]
[--lake local|s3] [--s3-latency-ms N] [--table-parallelism N] [--driver-max-changes N]
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

import pyarrow as pa

from benchmarks.common import (
    POLL,
    ContinuousJob,
    jvm_pid,
    lake_settings,
    load_table,
    rows,
    run_service,
    service_config,
    spark_session,
)
from benchmarks.rss import peak_rss_mb
from tests.support.waiting import wait_until


def _tiny_tables(client, names: list[str]) -> float:
    """``names`` as tables of 20 rows in 4 buckets with a snapshot each; the seconds it took
    (8 at a time: setting up 10,000 tables one call after the other takes minutes)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(name: str) -> None:
        load_table(client, name, range(20), 4)
        client.take_snapshots(name)

    started = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, names))
    return time.perf_counter() - started


def _offset_entries(config) -> list[int]:
    """Bytes of each entry of the job's checkpoint offsets log (one per round Spark planned)."""
    from tiering.state.lease_file import checkpoint_dir

    logged = checkpoint_dir(config.job.checkpoint) / "offsets"
    entries = sorted((p for p in logged.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    return [p.stat().st_size for p in entries]


def _write_changes(client, names: list[str]) -> None:
    """Three rows changed in every table, 8 tables at a time."""
    from concurrent.futures import ThreadPoolExecutor

    changed = rows(pa.array([1, 7, 13], pa.int64()), salt=1)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda name: client.write_arrow(name, changed), names))


def _planning_pid(jvm: int | None) -> int | None:
    """The source's planning process: the Python process Spark starts for the streaming source."""
    for status in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            cmdline = status.read_bytes().replace(b"\0", b" ")
            ppid = int(Path(status.parent, "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == jvm and b"streaming" in cmdline:
            return int(status.parent.name)
    return None


def _idle_rounds(config, repeat: int) -> dict:
    """A continuous job over tables where nothing changes, in a fresh driver process (what a
    driver tiering them needs, not what this process kept from the bootstrap): its first trigger
    (every table planned cold) and the empty rounds after it; the peak RSS of the driver's Python,
    its JVM and the source's planning process."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_idle_driver, (config, repeat))


def _idle_driver(config, repeat: int) -> dict:
    """The figures of :func:`_idle_rounds`, measured with the job's own progress retention (as
    deployed): Spark then keeps only a few reports, so each trigger's timings are collected as
    they appear, and only those (a parsed report holds both offsets of its trigger)."""
    from tiering.job import PROGRESS_RETENTION

    spark = spark_session()
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "0")  # a progress report per idle trigger
    spark.conf.unset(PROGRESS_RETENTION[0])
    pids = {"python": os.getpid(), "jvm": jvm_pid(spark)}
    timings: dict[str, dict] = {}  # trigger start -> its durationMs, in trigger order

    def enough() -> bool:
        for b in running.batches():
            timings.setdefault(b.timestamp, dict(b.durationMs))
        return len(timings) >= repeat + 1 or running.error is not None

    with ContinuousJob(spark, config, epoch=2) as running:
        wait_until(enough, "idle rounds", timeout_s=600, interval_s=0.5)
        if running.error is not None:
            raise running.error
        idle = list(timings.values())
        pids["planning"] = _planning_pid(pids["jvm"])
        peaks = {name: peak_rss_mb(pid) if pid is not None else None for name, pid in pids.items()}
    spark.stop()
    if any("addBatch" in b for b in idle):
        raise RuntimeError("benchmark: an idle round tiered something")
    rest = [b["triggerExecution"] for b in idle[1:]]
    return {
        "first_trigger_ms": idle[0]["triggerExecution"],
        "first_planning_ms": idle[0].get("latestOffset"),
        "empty_round_p50_ms": statistics.median(rest),
        "empty_round_max_ms": max(rest),
        "empty_round_planning_p50_ms": statistics.median(b.get("latestOffset", 0) for b in idle[1:]),
        "peak_rss_mb": {**peaks, "driver_total": round((peaks["python"] or 0) + (peaks["jvm"] or 0), 1)},
    }


def _changed_round(spark, client, config, names: list[str]) -> dict:
    """Rounds of a continuous job that tier a few changed rows of every table: the changes are
    written between two triggers, twice. The first round is the term's first over these tables
    (the driver reads each Delta log afresh: ``first_round_ms``); the second is the measured one,
    a round of a running job. Its time, Spark's breakdown, the offsets entry it wrote."""
    rounds = []
    with ContinuousJob(spark, config, epoch=3) as running:
        wait_until(
            lambda: running.batches() or running.error,
            "the first trigger",
            timeout_s=600,
            interval_s=POLL["interval_s"],
        )
        for _ in range(2):
            seen = len(running.batches())
            _write_changes(client, names)
            rounds.append(
                wait_until(
                    lambda: (
                        next((b for b in running.batches()[seen:] if "addBatch" in b.durationMs), None) or running.error
                    ),
                    timeout_s=600,
                    what="the changed round",
                    interval_s=1.0,
                )
            )
            if running.error is not None:
                raise running.error
    first, batch = rounds
    round_ms = batch.durationMs["triggerExecution"]
    tables = _round_tables(config, batch.batchId)
    return {
        "round_ms": round_ms,
        "round_tables": tables,
        "per_table_ms": round(round_ms / tables, 2),
        "first_round_ms": first.durationMs["triggerExecution"],
        "breakdown_ms": {k: v for k, v in sorted(batch.durationMs.items()) if v},
        "offset_entry_bytes": _offset_entries(config)[-1],
    }


def _round_tables(config, batch_id: int) -> int:
    """Tables in round ``batch_id`` (its offsets entry): a trigger may fire while the changes are
    still being written, and then the measured round holds only part of the tables."""
    from tiering.state.offset_log import read_batch_offset

    return len({s.table for s in read_batch_offset(config.job.checkpoint, batch_id).splits})


def bench_tables(args, work: Path, store) -> dict:
    with contextlib.ExitStack() as stack:
        return _bench_tables(args, work, store, lake_settings(args, work, stack))


def _bench_tables(args, work: Path, store, where: dict) -> dict:
    client = store.client(timeout_s=600)
    spark = spark_session()
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "0")  # a progress report per idle trigger
    results = []
    for count in (int(n) for n in args.counts.split(",")):
        names = [f"t{count}_{i:05d}" for i in range(count)]
        setup_s = _tiny_tables(client, names)
        job = f"bench-tables-{count}"
        settings = {"tables.include": [f"t{count}_*"]}
        lake = {**where, "driver_max_changes": args.driver_max_changes}
        if args.table_parallelism:
            lake["table_parallelism"] = args.table_parallelism
        bootstrap = run_service(spark, service_config(work, store.url, job, settings, **lake))
        measured = {"tables": count, "setup_s": round(setup_s, 1), "bootstrap_s": round(bootstrap.wall_s, 1)}
        idle = {**settings, "trigger.available_now": False, "trigger.interval_s": 0.5}
        measured["idle"] = _idle_rounds(service_config(work, store.url, job, idle, **lake), args.repeat)
        if count <= args.changed_max:
            changing = {**settings, "trigger.available_now": False, "trigger.interval_s": 20.0}
            measured.update(
                _changed_round(spark, client, service_config(work, store.url, job, changing, **lake), names)
            )
        results.append(measured)
        print(json.dumps(measured), file=sys.stderr, flush=True)
    spark.stop()
    return {"buckets_per_table": 4, "lake": args.lake, "rounds": results}
