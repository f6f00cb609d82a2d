"""``empty-round`` and ``lag`` modes: a continuous job's fixed cost per round, and how far the
lake trails a steady writer.

- ``empty-round``: one tiered table (8 buckets, 100k rows) under a continuous job; the wall time
  of rounds where nothing changed (Spark's ``triggerExecution``: planning, no batch) and of
  rounds carrying one changed row (planning, the batch, the MERGE, the report, the release);
- ``lag --rate R --duration S``: a steady writer of R rows/s (upserts) while a continuous job
  runs with the default trigger: seconds from each write's acknowledgement to the lake reaching
  its offsets, p50/p99/max.

Run: .venv/bin/python -m benchmarks.bench_tiering empty-round|lag [--repeat R] [--rate R] [--duration S]
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from pathlib import Path

import pyarrow as pa

from benchmarks.common import POLL, ContinuousJob, load_table, rows, service_config, spark_session
from tests.support.waiting import wait_until


def bench_empty_round(args, work: Path, store) -> dict:
    from tiering.delta_log.lake import Lake
    from tiering.enumerator.positions import LakePosition

    client = store.client(timeout_s=600)
    load_table(client, "one", range(100_000), 8)
    client.take_snapshots("one")
    spark = spark_session()
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "0")  # a progress report per idle trigger
    config = service_config(work, store.url, "bench-empty", {"trigger.available_now": False, "trigger.interval_s": 0.5})
    lake = Lake.of(config.lake)
    with ContinuousJob(spark, config) as running:
        wait_until(lambda: lake.position("one", 1), "the bootstrap", **POLL)
        wait_until(
            lambda: sum(1 for b in running.batches() if "addBatch" not in b.durationMs) >= args.repeat + 2,
            what="idle rounds",
            **POLL,
        )
        idle = [b.durationMs["triggerExecution"] for b in running.batches() if "addBatch" not in b.durationMs][2:]
        one_row = []
        for i in range(args.repeat):
            seen = len(running.batches())
            written = client.upsert("one", [{"id": i, "name": f"changed-{i}", "qty": i, "price": 1.0}])
            ((bucket, (_, end)),) = written.buckets.items()
            wait_until(
                lambda: (lake.position("one", 1) or LakePosition(1)).buckets.get(int(bucket), 0) >= end,
                what="the changed row in the lake",
                **POLL,
            )
            batch = wait_until(
                lambda: next((b for b in running.batches()[seen:] if "addBatch" in b.durationMs), None),
                what="the round's progress report",
                **POLL,
            )
            one_row.append(dict(batch.durationMs))
        if running.error is not None:
            raise running.error
    spark.stop()
    return {
        "repeat": args.repeat,
        "empty_round_p50_ms": statistics.median(idle),
        "empty_round_max_ms": max(idle),
        "one_row_round_p50_ms": statistics.median(b["triggerExecution"] for b in one_row),
        "one_row_round_max_ms": max(b["triggerExecution"] for b in one_row),
        "one_row_round_p50_breakdown_ms": {
            k: statistics.median(b.get(k, 0) for b in one_row) for k in sorted(one_row[0])
        },
    }


def bench_lag(args, work: Path, store) -> dict:
    from tiering.delta_log.lake import Lake, LakeTables

    client = store.client(timeout_s=600)
    keys = 100_000
    load_table(client, "steady", range(keys), 8)
    client.take_snapshots("steady")
    spark = spark_session()
    config = service_config(work, store.url, "bench-lag", {"trigger.available_now": False})
    lake = LakeTables(Lake.of(config.lake))
    pending: list[tuple[float, dict[int, int]]] = []
    lags: list[float] = []
    lock = threading.Lock()
    stop = threading.Event()

    def writer() -> None:
        rng = random.Random(3)
        batch = max(1, args.rate // 10)
        salt = 0
        while not stop.wait(0.1):
            salt += 1
            written = client.write_arrow("steady", rows(pa.array(rng.sample(range(keys), batch), pa.int64()), salt))
            with lock:
                pending.append((time.monotonic(), {int(b): end for b, (_, end) in written.buckets.items()}))

    def poll() -> None:
        while not stop.wait(0.05):
            table = lake.load("steady")
            reached = table.position().buckets if table is not None and table.position() is not None else {}
            now = time.monotonic()
            with lock:
                landed = [p for p in pending if all(reached.get(b, 0) >= end for b, end in p[1].items())]
                for p in landed:
                    pending.remove(p)
                    lags.append(now - p[0])

    with ContinuousJob(spark, config) as running:
        wait_until(lambda: lake.load("steady") is not None, "the bootstrap", **POLL)
        threads = [threading.Thread(target=writer, daemon=True), threading.Thread(target=poll, daemon=True)]
        for t in threads:
            t.start()
        time.sleep(args.duration)
        stop.set()
        for t in threads:
            t.join(30)
        rounds = sum(1 for b in running.batches() if "addBatch" in b.durationMs)
        if running.error is not None:
            raise running.error
    spark.stop()
    lags.sort()
    return {
        "rate_rows_per_s": args.rate,
        "duration_s": args.duration,
        "trigger_interval_s": config.trigger.interval_s,
        "writes": len(lags) + len(pending),
        "writes_landed": len(lags),
        "rounds": rounds,
        "lag_p50_s": round(lags[len(lags) // 2], 2),
        "lag_p99_s": round(lags[int(len(lags) * 0.99)], 2),
        "lag_max_s": round(lags[-1], 2),
    }
