"""Bootstrap throughput of the lake round writer against a plain Spark copy of the same files.

What it guards against: a round protocol (per-bucket copy-on-write, staging + rename, stats
from footers, fenced commit) that costs much more than the copy itself, or a driver whose
memory grows with the snapshot. In one run, on the same snapshot files (pyarrow-written, as
the store writes them, one file per bucket):

- baseline: ``spark.read.parquet`` -> ``write.partitionBy("__bucket").parquet`` into the
  table directory -> one delta-rs commit of the files (no staging, no txn, no stats);
- writer: ``DeltaRsRoundWriter.write_table_round`` with one snapshot split per bucket;
- log round: one further round merging changes into one bucket (copy-on-write of that bucket).

Reports rows/s of both, their ratio, the log round's time, and peak RSS of the Python driver
and of the driver JVM. Run: .venv/bin/python benchmarks/bench_tiering.py [--rows N] [--buckets B]
Writes benchmarks/results/bench_tiering.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from deltalake import DeltaTable, Schema  # noqa: E402
from deltalake.transaction import create_table_with_add_actions  # noqa: E402

from tiering.enumerator.splits import LogSplit, SnapshotSplit  # noqa: E402
from tiering.kvstore.models import TableInfo  # noqa: E402
from tiering.lake import staging  # noqa: E402
from tiering.lake.layout import lake_schema  # noqa: E402
from tiering.lake.round_writer import DeltaRsRoundWriter  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "bench_tiering.json"
_CHUNK = 250_000


def _table(buckets: int) -> TableInfo:
    return TableInfo(
        name="bench",
        table_id=1,
        num_buckets=buckets,
        primary_key=["id"],
        schema=[
            {"name": "id", "type": "bigint"},
            {"name": "name", "type": "string"},
            {"name": "qty", "type": "int"},
            {"name": "price", "type": "double"},
        ],
    )


def _chunk(ids: pa.Array, op: str | None = None) -> pa.Table:
    n = len(ids)
    data = {
        "id": ids,
        "name": pc.binary_join_element_wise("name-", pc.cast(ids, pa.string()), ""),
        "qty": pc.cast(pc.bit_wise_and(ids, 1023), pa.int32()),
        "price": pc.multiply(pc.cast(ids, pa.float64()), 0.01),
        "__offset": pa.array(range(n), pa.int64()),
    }
    if op is not None:
        data["__op"] = pa.array([op] * n)
    data["__timestamp"] = pa.array([1_700_000_000_000_000] * n, pa.timestamp("us", tz="UTC"))
    return pa.table(data)


def generate_snapshots(directory: Path, rows: int, buckets: int) -> dict[int, str]:
    """One snapshot file per bucket; ids of bucket b are ``b, b + B, b + 2B, ...``."""
    directory.mkdir(parents=True)
    files = {}
    for bucket in range(buckets):
        count = rows // buckets + (1 if bucket < rows % buckets else 0)
        path = directory / f"snapshot-{bucket}.parquet"
        with pq.ParquetWriter(path, _chunk(pa.array([0], pa.int64())).schema) as out:
            for start in range(0, count, _CHUNK):
                ids = pa.array(range(bucket + start * buckets, bucket + min(start + _CHUNK, count) * buckets, buckets), pa.int64())
                out.write_table(_chunk(ids))
        files[bucket] = str(path)
    return files


def baseline(spark, files: dict[int, str], table: TableInfo, table_dir: Path) -> float:
    """The same copy with no round protocol: Spark writes into the table, one commit."""
    from pyspark.sql import functions as F

    started = time.perf_counter()
    frames = [spark.read.parquet(f).withColumn("__bucket", F.lit(b).cast("int")) for b, f in files.items()]
    df = frames[0]
    for other in frames[1:]:
        df = df.unionByName(other)
    stage = table_dir / staging.STAGING_DIR / "baseline"
    df.write.partitionBy("__bucket").parquet(str(stage))
    adds = staging.move_into_table(str(stage), str(table_dir))
    create_table_with_add_actions(str(table_dir), Schema.from_arrow(lake_schema(table)), adds, partition_by=["__bucket"])
    return time.perf_counter() - started


def _jvm_peak_rss_mb(spark) -> float | None:
    """Peak RSS of the driver JVM (local mode: it also runs the executors' tasks)."""
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    if proc is None:
        return None
    with open(f"/proc/{proc.pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--buckets", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2, help="alternating runs of each; the best counts")
    parser.add_argument("--changes", type=int, default=20_000, help="changes merged in the log round")
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("bench-tiering")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="bench-tiering-"))
    try:
        table = _table(args.buckets)
        files = generate_snapshots(work / "store", args.rows, args.buckets)
        # JVM warm-up (a read and a write) outside the timings
        spark.range(100_000).write.parquet(str(work / "warm-up"))
        splits = {SnapshotSplit("bench", b, 1, snapshot_id=1, log_offset=_CHUNK * 1000): [f] for b, f in files.items()}
        base_times, writer_times = [], []
        for repeat in range(args.repeats):  # alternate, keep the best of each: less order bias
            base_times.append(baseline(spark, files, table, work / f"baseline-{repeat}" / "bench"))
            writer = DeltaRsRoundWriter(spark, str(work / f"lake-{repeat}"), "bench")
            started = time.perf_counter()
            commit = writer.write_table_round(table, sorted(splits), splits, epoch=1, round_id=1, lease_id="bench")
            writer_times.append(time.perf_counter() - started)
            assert commit.rows_out == args.rows, commit
        base_s, writer_s = min(base_times), min(writer_times)

        changes = min(args.changes, args.rows // args.buckets)
        log_file = work / "store" / "log-0.parquet"
        log = _chunk(pa.array(range(0, changes * args.buckets, args.buckets), pa.int64()), op="+U")
        log = log.set_column(log.schema.get_field_index("__offset"), "__offset", pa.array(range(_CHUNK * 1000, _CHUNK * 1000 + changes), pa.int64()))
        pq.write_table(log, log_file)
        split = LogSplit("bench", 0, 1, _CHUNK * 1000, _CHUNK * 1000 + changes)
        started = time.perf_counter()
        merged = writer.write_table_round(table, [split], {split: [str(log_file)]}, epoch=1, round_id=2, lease_id="bench")
        log_round_s = time.perf_counter() - started
        assert merged.rows_in == changes and merged.rows_out == args.rows // args.buckets + (args.rows % args.buckets > 0)

        result = {
            "rows": args.rows,
            "buckets": args.buckets,
            "baseline_runs_s": [round(t, 3) for t in base_times],
            "writer_runs_s": [round(t, 3) for t in writer_times],
            "baseline_s": round(base_s, 3),
            "baseline_rows_per_s": round(args.rows / base_s),
            "writer_s": round(writer_s, 3),
            "writer_rows_per_s": round(args.rows / writer_s),
            "writer_vs_baseline_throughput": round(base_s / writer_s, 3),
            "log_round_changes": changes,
            "log_round_bucket_rows": merged.rows_out,
            "log_round_s": round(log_round_s, 3),
            "driver_python_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "driver_jvm_peak_rss_mb": _jvm_peak_rss_mb(spark),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        }
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"baseline {result['baseline_rows_per_s']:,} rows/s | writer {result['writer_rows_per_s']:,} rows/s | "
        f"writer/baseline throughput {result['writer_vs_baseline_throughput']} | log round of {changes:,} changes "
        f"into {merged.rows_out:,} rows: {log_round_s:.2f}s | peak RSS python {result['driver_python_peak_rss_mb']} MB, "
        f"JVM {result['driver_jvm_peak_rss_mb']} MB"
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
