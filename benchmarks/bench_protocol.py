"""``leases`` and ``planning`` modes: what the protocol itself costs a round, without Spark.

- ``leases --buckets B``: a ``JobLease`` acquire of B snapshots + release of B buckets (medians
  of ``--repeat``);
- ``planning --tables T --buckets B``: ``RoundPlanner.plan`` over T x B synthetic buckets vs.
  encoding the resulting offset as JSON (what Spark writes to the checkpoint every round).

Run: .venv/bin/python -m benchmarks.bench_tiering leases|planning [--tables T] [--buckets B] [--repeat R]
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pyarrow as pa

from benchmarks.common import SCHEMA, rows
from tiering.kvstore.models import TableSpec


def bench_leases(args, work: Path, store) -> dict:
    from tiering.kvstore.contract import SnapshotRef
    from tiering.kvstore.reference import ReferenceStore
    from tiering.lease.job_lease import JobLease

    client = store.client()
    info = client.create_table(
        TableSpec.model_validate(
            {"name": "leased", "schema": SCHEMA, "primary_key": ["id"], "num_buckets": args.buckets}
        )
    )
    client.write_arrow("leased", rows(pa.array(range(args.buckets * 4), pa.int64())))
    snaps = client.take_snapshots("leased").buckets
    refs = [SnapshotRef(info.table_id, s.bucket, s.snapshot_id, s.log_offset) for s in snaps]
    lease = JobLease(ReferenceStore(client), "bench-lease", 1, 600_000)
    acquire, release = [], []
    for _ in range(args.repeat):
        started = time.perf_counter()
        assert lease.acquire(refs) == []
        acquire.append(time.perf_counter() - started)
        started = time.perf_counter()
        lease.release_table(info.table_id, [s.bucket for s in snaps])
        release.append(time.perf_counter() - started)
    a, r = statistics.median(acquire) * 1000, statistics.median(release) * 1000
    return {
        "buckets": args.buckets,
        "repeat": args.repeat,
        "acquire_p50_ms": round(a, 2),
        "release_p50_ms": round(r, 2),
        "per_round_ms": round(a + r, 2),
    }


def bench_planning(args, work: Path, store) -> dict:
    from tiering.enumerator.planner import RoundPlanner, TableInput
    from tiering.enumerator.positions import LakePosition
    from tiering.kvstore.contract import BucketLog, SnapshotRef
    from tiering.kvstore.models import TableInfo
    from tiering.kvstore.reference import store_table
    from tiering.source import checkpoint

    inputs = []
    for t in range(args.tables):
        info = store_table(
            TableInfo.model_validate(
                {
                    "name": f"t{t:04d}",
                    "table_id": t + 1,
                    "schema": SCHEMA,
                    "primary_key": ["id"],
                    "num_buckets": args.buckets,
                }
            )
        )
        tiered = t % 2 == 0  # half the tables are tiered (log splits), half bootstrap (snapshot + log)
        snaps = [SnapshotRef(t + 1, b, 3, 500, row_count=500, size_bytes=50_000) for b in range(args.buckets)]
        logs = [BucketLog(b, 0, 1000 + b) for b in range(args.buckets)]
        lake = LakePosition(t + 1, {b: 800 for b in range(args.buckets)}) if tiered else None
        inputs.append(TableInput(info=info, snapshots=snaps, logs=logs, lake=lake))
    planner = RoundPlanner()
    plan_times, encode_times = [], []
    for _ in range(args.repeat):
        started = time.perf_counter()
        plan = planner.plan(1, inputs)
        plan_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        encoded = checkpoint(plan, lease_id="bench", epoch=1).to_json()
        encode_times.append(time.perf_counter() - started)
    p, e = statistics.median(plan_times) * 1000, statistics.median(encode_times) * 1000
    return {
        "tables": args.tables,
        "buckets_per_table": args.buckets,
        "splits": len(plan.splits),
        "plan_p50_ms": round(p, 1),
        "offset_json_p50_ms": round(e, 1),
        "offset_json_kb": round(len(encoded) / 1024, 1),
        "plan_vs_offset_json": round(p / e, 2),
    }
