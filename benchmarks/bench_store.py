"""Benchmark of the reference KV store: Arrow ingest throughput and lease call latency.

Why: the store is the tiering job's upstream in every test and demo; if ingest or lease calls
are slow, every measurement of the job measures the store instead. Each number comes with a
baseline measured in the same run on the same machine:
- ingest: the store's Arrow write path (HTTP + validation + bucketing + one Parquet log
  segment per bucket) vs. pyarrow writing the same rows to one Parquet file;
- leases: acquire/release of 1, 100, 1,000 buckets vs. the HTTP floor (GET /v1/health).

Run: .venv/bin/python -m benchmarks.bench_store [--rows N] [--repeat R] [--out FILE]
Writes benchmarks/results/bench_store.json (``--out``).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import requests

from benchmarks.common import RESULTS, write_json
from benchmarks.rss import peak_rss_mb
from tiering.kvstore.models import BucketRef, SnapshotRef, TableSpec
from tiering.kvstore.server.process import StoreProcess


def _rows(n: int) -> pa.Table:
    ids = pa.array(range(n), pa.int64())
    return pa.table(
        {
            "id": ids,
            "amount": pa.array(range(n), pa.float64()),
            "note": pa.array([f"note-{i % 1000}" for i in range(n)]),
        }
    )


def _percentiles(samples_s: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples_s)
    return {"p50_ms": round(statistics.median(ms), 3), "p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 3)}


def bench_ingest(store: StoreProcess, rows: int, workdir: Path) -> dict:
    client = store.client(timeout_s=600)
    client.create_table(
        TableSpec(
            name="ingest",
            schema=[
                {"name": "id", "type": "bigint"},
                {"name": "amount", "type": "double"},
                {"name": "note", "type": "string"},
            ],
            primary_key=["id"],
            num_buckets=8,
        )
    )
    data = _rows(rows)
    start = time.perf_counter()
    pq.write_table(data, workdir / "baseline.parquet", compression="zstd")
    baseline_s = time.perf_counter() - start
    start = time.perf_counter()
    client.write_arrow("ingest", data)
    store_s = time.perf_counter() - start
    start = time.perf_counter()
    snapshots = client.take_snapshots("ingest")
    snapshot_s = time.perf_counter() - start
    assert sum(s.row_count for s in snapshots.buckets) == rows
    return {
        "rows": rows,
        "store_write_s": round(store_s, 3),
        "store_rows_per_s": round(rows / store_s),
        "baseline_parquet_write_s": round(baseline_s, 3),
        "baseline_rows_per_s": round(rows / baseline_s),
        "ratio_store_to_baseline": round(store_s / baseline_s, 2),
        "snapshot_all_buckets_s": round(snapshot_s, 3),
    }


def bench_leases(store: StoreProcess, repeat: int) -> dict:
    client = store.client()
    session = requests.Session()
    health = []
    for _ in range(repeat):
        start = time.perf_counter()
        session.get(f"{store.url}/v1/health", timeout=10).raise_for_status()
        health.append(time.perf_counter() - start)
    result = {"baseline_health": _percentiles(health)}
    for buckets in (1, 100, 1000):
        name = f"lease{buckets}"
        info = client.create_table(
            TableSpec(
                name=name,
                schema=[{"name": "id", "type": "bigint"}],
                primary_key=["id"],
                num_buckets=buckets,
            )
        )
        snaps = client.take_snapshots(name).buckets
        refs = [SnapshotRef(table_id=info.table_id, bucket=s.bucket, snapshot_id=s.snapshot_id) for s in snaps]
        bucket_refs = [BucketRef(table_id=info.table_id, bucket=s.bucket) for s in snaps]
        acquire, release = [], []
        for _ in range(repeat):
            start = time.perf_counter()
            held = client.acquire_lease(f"bench-{buckets}", epoch=1, duration_ms=600_000, snapshots=refs)
            acquire.append(time.perf_counter() - start)
            assert len(held.snapshots) == buckets and not held.unavailable
            start = time.perf_counter()
            client.release_lease(f"bench-{buckets}", epoch=1, buckets=bucket_refs)
            release.append(time.perf_counter() - start)
        a, r = _percentiles(acquire), _percentiles(release)
        floor = result["baseline_health"]["p50_ms"]
        result[f"buckets_{buckets}"] = {
            "acquire": a,
            "release": r,
            "ratio_acquire_p50_to_health_p50": round(a["p50_ms"] / floor, 1),
            "ratio_release_p50_to_health_p50": round(r["p50_ms"] / floor, 1),
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=50, help="lease acquire/release rounds per bucket count")
    parser.add_argument("--out", type=Path, default=RESULTS / "bench_store.json", help="where the JSON goes")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        workdir = Path(tmp)
        store = StoreProcess.start(workdir / "store", gc_interval_s=3600)
        try:
            ingest = bench_ingest(store, args.rows, workdir)
            leases = bench_leases(store, args.repeat)
            peak_rss = peak_rss_mb(store.pid)
        finally:
            store.stop()
    report = {
        "benchmark": "bench_store",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "ingest": ingest,
        "leases": leases,
        "store_peak_rss_mb": peak_rss,
    }
    write_json(args.out, report)
    print(
        f"ingest {ingest['rows']:,} rows (Arrow): {ingest['store_rows_per_s']:,} rows/s "
        f"vs pyarrow Parquet write {ingest['baseline_rows_per_s']:,} rows/s "
        f"(store takes {ingest['ratio_store_to_baseline']}x); "
        f"snapshot of all buckets {ingest['snapshot_all_buckets_s']}s"
    )
    print(f"HTTP floor (GET /v1/health) p50 {leases['baseline_health']['p50_ms']} ms")
    for buckets in (1, 100, 1000):
        row = leases[f"buckets_{buckets}"]
        print(
            f"lease {buckets:>5} buckets: acquire p50 {row['acquire']['p50_ms']} ms p99 {row['acquire']['p99_ms']} ms "
            f"({row['ratio_acquire_p50_to_health_p50']}x floor); release p50 {row['release']['p50_ms']} ms "
            f"p99 {row['release']['p99_ms']} ms ({row['ratio_release_p50_to_health_p50']}x floor)"
        )
    print(f"store peak RSS {peak_rss} MB -> {args.out}")


if __name__ == "__main__":
    main()
