"""``snapshot`` mode: the whole service tiering a snapshot against the same copy written by hand.

What it guards against: a service whose protocol (planning, leases, per-bucket copy-on-write,
executors writing files, fenced commits, store reports) costs much more than the copy it wraps,
and a driver whose memory grows with the snapshot.

``--rows N [--lake local|s3]``: N rows in the store (one snapshot per bucket), tiered by the
WHOLE service (store process + ``TieringJob`` availableNow: plan, lease, executors write the
files, commit, report, release) vs. two hand-written copies of the same snapshot files to the
same storage: Spark reads them and writes partitioned Parquet that one delta-rs commit adds
(local lake only: Spark has no S3 writer here), and pyarrow reads them while delta-rs
``write_deltalake`` writes them partitioned by ``__bucket`` in one commit.
``service_vs_baseline_throughput`` is against the Spark copy (the pyarrow copy on S3; the
``baseline`` key names it), ``service_vs_pyarrow_copy`` against the pyarrow copy. rows/s, MB/s
(snapshot bytes), and peak RSS of the Python driver and its JVM during the service run (peaks
reset just before it). ``--lake s3`` runs against an embedded S3 server (SeaweedFS on loopback)
started by the benchmark.

Run: .venv/bin/python -m benchmarks.bench_tiering snapshot [--rows N] [--buckets B] [--lake local|s3]
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from benchmarks.common import jvm_pid, lake_settings, load_table, run_service, service_config, spark_session, table_info
from benchmarks.rss import peak_rss_mb, reset_peak


def baseline_spark_copy(spark, snapshots, table_dir: Path) -> float:
    """Spark reads the snapshot files and writes partitioned Parquet; the files are moved into
    the table and delta-rs commits them once (a local lake: the move is a rename)."""
    from deltalake import Schema
    from deltalake.transaction import AddAction, create_table_with_add_actions
    from pyspark.sql import functions as F

    from tiering.delta_log.layout import lake_schema

    started = time.perf_counter()
    frames = [
        spark.read.parquet(*s.files).withColumn("__bucket", F.lit(s.bucket).cast("int"))
        for s in snapshots.buckets
        if s.files
    ]
    df = frames[0]
    for other in frames[1:]:
        df = df.unionByName(other)
    stage = table_dir / "_baseline_stage"
    df.write.partitionBy("__bucket").parquet(str(stage))
    adds = []
    for part in sorted(stage.glob("__bucket=*")):
        (table_dir / part.name).mkdir(parents=True)
        for f in sorted(part.glob("*.parquet")):
            target = table_dir / part.name / f.name
            f.rename(target)
            rows = pq.read_metadata(target).num_rows
            adds.append(
                AddAction(
                    f"{part.name}/{f.name}",
                    target.stat().st_size,
                    {"__bucket": part.name.split("=")[1]},
                    int(time.time() * 1000),
                    True,
                    json.dumps({"numRecords": rows}),
                )
            )
    schema = lake_schema(table_info(len(snapshots.buckets)))
    create_table_with_add_actions(str(table_dir), Schema.from_arrow(schema), adds, partition_by=["__bucket"])
    return time.perf_counter() - started


def baseline_copy(snapshots, lake, name: str) -> float:
    """The same copy without the service, by hand: pyarrow reads the snapshot files, delta-rs
    writes them partitioned by ``__bucket`` into ``name`` under the same lake, in one commit."""
    from deltalake import write_deltalake

    from tiering.writers.buckets import file_schema

    schema = file_schema(table_info(len(snapshots.buckets))).append(pa.field("__bucket", pa.int32()))

    def batches():
        for snap in snapshots.buckets:
            for batch in pq.ParquetFile(snap.files[0]).iter_batches() if snap.files else ():
                yield batch.append_column("__bucket", pa.array([snap.bucket] * batch.num_rows, pa.int32()))

    started = time.perf_counter()
    write_deltalake(
        lake.path(name),
        pa.RecordBatchReader.from_batches(schema, batches()),
        partition_by=["__bucket"],
        storage_options=lake.store.delta_options(),
    )
    return time.perf_counter() - started


def bench_snapshot(args, work: Path, store) -> dict:
    from tiering.delta_log.lake import Lake

    client = store.client(timeout_s=600)
    load_table(client, "snap", range(args.rows), args.buckets)
    snapshots = client.take_snapshots("snap")
    snapshot_bytes = sum(s.size_bytes for s in snapshots.buckets)
    assert sum(s.row_count for s in snapshots.buckets) == args.rows
    with contextlib.ExitStack() as stack:
        settings = lake_settings(args, work, stack)
        spark = spark_session()
        jvm = jvm_pid(spark)
        spark.range(100_000).write.parquet(str(work / "warm-up"))  # JVM warm-up outside the timings
        load_table(client, "warmup", range(1000), args.buckets)
        client.take_snapshots("warmup")
        # the process's first run starts Spark's Python workers: timed apart, as the fixed cost
        cold_s = run_service(
            spark, service_config(work, store.url, "bench-warmup", {"tables.include": ["warmup"]}, **settings)
        ).wall_s
        config = service_config(work, store.url, "bench-snapshot", {"tables.include": ["snap"]}, **settings)
        lake = Lake.of(config.lake)
        for pid in (os.getpid(), jvm):
            if pid:
                reset_peak(pid)
        run = run_service(spark, config)
        service_s, result = run.wall_s, run.result
        driver_peak, jvm_peak = peak_rss_mb(os.getpid()), peak_rss_mb(jvm) if jvm else None
        actions = pa.table(lake.load("snap").dt.get_add_actions(flatten=True))
        lake_rows = pc.sum(actions.column("num_records")).as_py()
        assert lake_rows == args.rows, (lake_rows, args.rows)
        pyarrow_s = baseline_copy(snapshots, lake, "baseline-snap")
        spark_s = (
            baseline_spark_copy(spark, snapshots, work / "baseline-spark" / "snap") if args.lake == "local" else None
        )
        spark.stop()
    mb = snapshot_bytes / 2**20
    baseline_s = spark_s if spark_s is not None else pyarrow_s
    return {
        "rows": args.rows,
        "buckets": args.buckets,
        "lake": args.lake,
        "snapshot_mb": round(mb, 1),
        "rounds": result.rounds,
        "first_run_1k_rows_s": round(cold_s, 3),
        "service_round_s": round(run.rounds_s, 3),
        "service_s": round(service_s, 3),
        "service_rows_per_s": round(args.rows / service_s),
        "service_mb_per_s": round(mb / service_s, 2),
        "baseline": "spark-parquet-delta-rs" if spark_s is not None else "pyarrow-delta-rs",
        "baseline_s": round(baseline_s, 3),
        "baseline_rows_per_s": round(args.rows / baseline_s),
        "baseline_mb_per_s": round(mb / baseline_s, 2),
        "service_vs_baseline_throughput": round(baseline_s / service_s, 3),
        "pyarrow_copy_s": round(pyarrow_s, 3),
        "service_vs_pyarrow_copy": round(pyarrow_s / service_s, 3),
        "driver_python_peak_rss_mb": driver_peak,
        "driver_jvm_peak_rss_mb": jvm_peak,
    }
