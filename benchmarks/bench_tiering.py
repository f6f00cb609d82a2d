"""The tiering service against hand-written copies of the same data, measured in one run.

What it guards against: a service whose protocol (planning, leases, per-bucket copy-on-write,
executors writing files, fenced commits, store reports) costs much more than the copy it wraps, and a
driver whose memory grows with the snapshot. Each mode runs in its own process (so peak RSS
belongs to one measurement) and prints one JSON object:

- ``snapshot --rows N [--lake local|s3]``: N rows in the store (one snapshot per bucket), tiered
  by the WHOLE service (store process + ``TieringJob`` availableNow: plan, lease, executors
  write the files, commit, report, release) vs. two hand-written copies of the same snapshot
  files to the same storage: Spark reads them and writes partitioned Parquet that one delta-rs
  commit adds (local lake only: Spark has no S3 writer here), and pyarrow reads them while
  delta-rs ``write_deltalake`` writes them partitioned by ``__bucket`` in one commit.
  ``service_vs_baseline_throughput`` is against the Spark copy (the pyarrow copy on S3; the
  ``baseline`` key names it), ``service_vs_pyarrow_copy`` against the pyarrow copy. rows/s,
  MB/s (snapshot bytes), and peak RSS of the Python driver and its JVM during the service run
  (peaks reset just before it). ``--lake s3`` runs against an embedded S3 server (SeaweedFS on
  loopback) started by the benchmark;
- ``changelog --keys K --updates U``: K keys tiered, then U upserts over them; the service's
  merge round vs. a hand-written ``DeltaTable.merge`` of the same changes (read the log
  segments with pyarrow, keep the latest change per key, MERGE); ``--merge-max-changes 0``
  makes the service rewrite the buckets with Spark instead of its driver MERGE;
- ``leases --buckets B``: a ``JobLease`` acquire of B snapshots + release of B buckets;
- ``planning --tables T --buckets B``: ``RoundPlanner.plan`` over T x B synthetic buckets vs.
  encoding the resulting offset as JSON (what Spark writes to the checkpoint every round).

Run: .venv/bin/python benchmarks/bench_tiering.py MODE [options]; `benchmarks/run_all.py` runs
them all and writes the results.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.rss import peak_rss_mb  # noqa: E402
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from tiering.conf.model import DEFAULT_MERGE_MAX_CHANGES  # noqa: E402
from tiering.kvstore.models import TableSpec  # noqa: E402

CHUNK = 250_000
SCHEMA = [
    {"name": "id", "type": "bigint"},
    {"name": "name", "type": "string"},
    {"name": "qty", "type": "int"},
    {"name": "price", "type": "double"},
]


def rows(ids: pa.Array, salt: int = 0) -> pa.Table:
    return pa.table({
        "id": ids,
        "name": pc.binary_join_element_wise(f"name-{salt}-", pc.cast(ids, pa.string()), ""),
        "qty": pc.cast(pc.bit_wise_and(pc.add(ids, salt), 1023), pa.int32()),
        "price": pc.multiply(pc.cast(ids, pa.float64()), 0.01 + salt),
    })


    return None


def reset_peak(pid: int) -> None:
    """Reset VmHWM to the current RSS (Linux: ``5`` into clear_refs), so the next peak is the run's."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        pass


def spark_session(memory: str = "2g"):
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("bench-tiering")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .config("spark.driver.memory", memory)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def jvm_pid(spark) -> int | None:
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    return proc.pid if proc is not None else None


def service_config(work: Path, store_url: str, job: str, **lake: object):
    from tiering.conf.loader import load_config

    return load_config(None, {}, {
        "lake.root": str(work / "lake"),
        **{f"lake.{key}": value for key, value in lake.items()},
        "job.name": job,
        "job.checkpoint": str(work / f"ckpt-{job}"),
        "kvstore.url": store_url,
        "zookeeper.hosts": "127.0.0.1:1",  # unused: the job runs as epoch 1 without an election
        "trigger.available_now": True,
        "lease.duration_s": 600.0,
    })


def lake_settings(args, work: Path, stack) -> dict:
    """``lake.root`` (and ``lake.storage``) for ``--lake``: a local directory, or a fresh embedded
    S3 server that ``stack`` stops at the end."""
    if args.lake == "local":
        return {"root": str(work / "lake")}
    from tiering.storage.embedded_s3 import EmbeddedS3

    s3 = stack.enter_context(EmbeddedS3(bucket="bench").start(work / "s3"))
    return {"root": f"{s3.root}/lake", "storage": s3.storage_options()}


def load_table(client, name: str, ids: range, buckets: int) -> None:
    from tiering.kvstore.models import TableSpec

    client.create_table(TableSpec.model_validate({"name": name, "schema": SCHEMA, "primary_key": ["id"], "num_buckets": buckets}))
    for start in range(ids.start, ids.stop, CHUNK):
        client.write_arrow(name, rows(pa.array(range(start, min(start + CHUNK, ids.stop)), pa.int64())))


def baseline_spark_copy(spark, snapshots, table_dir: Path) -> float:
    """Spark reads the snapshot files and writes partitioned Parquet; the files are moved into
    the table and delta-rs commits them once (a local lake: the move is a rename)."""
    from deltalake import Schema
    from deltalake.transaction import AddAction, create_table_with_add_actions
    from pyspark.sql import functions as F

    from tiering.lakestate.layout import lake_schema

    started = time.perf_counter()
    frames = [
        spark.read.parquet(*s.files).withColumn("__bucket", F.lit(s.bucket).cast("int")) for s in snapshots.buckets if s.files
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
            adds.append(AddAction(f"{part.name}/{f.name}", target.stat().st_size, {"__bucket": part.name.split("=")[1]},
                                  int(time.time() * 1000), True, json.dumps({"numRecords": rows})))
    schema = lake_schema(_info(len(snapshots.buckets)))
    create_table_with_add_actions(str(table_dir), Schema.from_arrow(schema), adds, partition_by=["__bucket"])
    return time.perf_counter() - started


def baseline_copy(snapshots, lake, name: str) -> float:
    """The same copy without the service, by hand: pyarrow reads the snapshot files, delta-rs
    writes them partitioned by ``__bucket`` into ``name`` under the same lake, in one commit."""
    from deltalake import write_deltalake

    from tiering.lake.bucket_files import file_schema

    schema = file_schema(_info(len(snapshots.buckets))).append(pa.field("__bucket", pa.int32()))

    def batches():
        for snap in snapshots.buckets:
            for batch in pq.ParquetFile(snap.files[0]).iter_batches() if snap.files else ():
                yield batch.append_column("__bucket", pa.array([snap.bucket] * batch.num_rows, pa.int32()))

    started = time.perf_counter()
    write_deltalake(lake.path(name), pa.RecordBatchReader.from_batches(schema, batches()), partition_by=["__bucket"],
                    storage_options=lake.store.delta_options())
    return time.perf_counter() - started


def _info(buckets: int):
    from tiering.kvstore.models import TableInfo

    return TableInfo.model_validate({"name": "b", "table_id": 1, "schema": SCHEMA, "primary_key": ["id"], "num_buckets": buckets})


def run_service(spark, config) -> tuple[float, object]:
    from tiering.job import TieringJob
    from tiering.context import TermContext

    started = time.perf_counter()
    result = TieringJob(spark, TermContext.begin(config, 1)).run()
    elapsed = time.perf_counter() - started
    if not result.ok:
        raise RuntimeError(f"service run failed: {result.failed_tables}")
    return elapsed, result


def bench_snapshot(args, work: Path, store) -> dict:
    from tiering.lakestate.lake import Lake

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
        config = service_config(work, store.url, "bench-snapshot", **settings)
        lake = Lake.of(config.lake)
        for pid in (os.getpid(), jvm):
            if pid:
                reset_peak(pid)
        service_s, result = run_service(spark, config)
        driver_peak, jvm_peak = peak_rss_mb(os.getpid()), peak_rss_mb(jvm) if jvm else None
        actions = pa.table(lake.load("snap").dt.get_add_actions(flatten=True))
        lake_rows = pc.sum(actions.column("num_records")).as_py()
        assert lake_rows == args.rows, (lake_rows, args.rows)
        pyarrow_s = baseline_copy(snapshots, lake, "baseline-snap")
        spark_s = baseline_spark_copy(spark, snapshots, work / "baseline-spark" / "snap") if args.lake == "local" else None
        spark.stop()
    mb = snapshot_bytes / 2**20
    baseline_s = spark_s if spark_s is not None else pyarrow_s
    return {
        "rows": args.rows, "buckets": args.buckets, "lake": args.lake, "snapshot_mb": round(mb, 1), "rounds": result.rounds,
        "service_s": round(service_s, 3), "service_rows_per_s": round(args.rows / service_s),
        "service_mb_per_s": round(mb / service_s, 2),
        "baseline": "spark-parquet-delta-rs" if spark_s is not None else "pyarrow-delta-rs",
        "baseline_s": round(baseline_s, 3), "baseline_rows_per_s": round(args.rows / baseline_s),
        "baseline_mb_per_s": round(mb / baseline_s, 2),
        "service_vs_baseline_throughput": round(baseline_s / service_s, 3),
        "pyarrow_copy_s": round(pyarrow_s, 3), "service_vs_pyarrow_copy": round(pyarrow_s / service_s, 3),
        "driver_python_peak_rss_mb": driver_peak, "driver_jvm_peak_rss_mb": jvm_peak,
    }


def bench_changelog(args, work: Path, store) -> dict:
    from deltalake import DeltaTable, write_deltalake

    client = store.client(timeout_s=600)
    load_table(client, "cl", range(args.keys), args.buckets)
    snapshots = client.take_snapshots("cl")
    spark = spark_session()
    config = service_config(work, store.url, "bench-changelog", merge_max_changes=args.merge_max_changes)
    run_service(spark, config)  # bootstrap, untimed
    # the baseline's target: the same base rows, as a plain Delta table
    base = pa.concat_tables([pq.read_table(f) for s in snapshots.buckets for f in s.files]).select(["id", "name", "qty", "price"])
    write_deltalake(str(work / "merge-target"), base)
    ends = {b.bucket: b.log_end_offset for b in client.log_info("cl").buckets}
    rng = random.Random(7)
    written, salt = 0, 0
    while written < args.updates:  # each write changes distinct keys; writes overlap each other
        salt += 1
        n = min(args.keys, args.updates - written, CHUNK)
        client.write_arrow("cl", rows(pa.array(rng.sample(range(args.keys), n), pa.int64()), salt))
        written += n
    changes = sum(b.log_end_offset - ends[b.bucket] for b in client.log_info("cl").buckets)

    service_s, _ = run_service(spark, config)

    started = time.perf_counter()
    files = [
        seg.file for b in client.log_info("cl").buckets
        for seg in client.log_segments("cl", b.bucket, ends[b.bucket], b.log_end_offset)
    ]
    log = pa.concat_tables([pq.read_table(f, columns=["id", "name", "qty", "price", "__offset"]) for f in files])
    newest = log.group_by("id").aggregate([("__offset", "max")])
    latest = log.join(newest, keys=["id", "__offset"], right_keys=["id", "__offset_max"], join_type="inner").drop(["__offset"])
    (
        DeltaTable(str(work / "merge-target"))
        .merge(latest, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all().when_not_matched_insert_all().execute()
    )
    baseline_s = time.perf_counter() - started
    spark.stop()
    return {
        "keys": args.keys, "buckets": args.buckets, "merge_max_changes": args.merge_max_changes, "changes": changes, "distinct_keys_changed": latest.num_rows,
        "service_s": round(service_s, 3), "service_changes_per_s": round(changes / service_s),
        "baseline_merge_s": round(baseline_s, 3), "baseline_changes_per_s": round(changes / baseline_s),
        "service_vs_baseline_throughput": round(baseline_s / service_s, 3),
    }


def bench_leases(args, work: Path, store) -> dict:
    from tiering.kvstore.models import SnapshotRef
    from tiering.lease.job_lease import JobLease

    client = store.client()
    info = client.create_table(TableSpec.model_validate(
        {"name": "leased", "schema": SCHEMA, "primary_key": ["id"], "num_buckets": args.buckets}))
    client.write_arrow("leased", rows(pa.array(range(args.buckets * 4), pa.int64())))
    snaps = client.take_snapshots("leased").buckets
    refs = [SnapshotRef(table_id=info.table_id, bucket=s.bucket, snapshot_id=s.snapshot_id) for s in snaps]
    lease = JobLease(client, "bench-lease", 1, 600_000)
    acquire, release = [], []
    for _ in range(args.repeat):
        started = time.perf_counter()
        assert lease.acquire(refs) == []
        acquire.append(time.perf_counter() - started)
        started = time.perf_counter()
        lease.release_table(info.table_id, [s.bucket for s in snaps])
        release.append(time.perf_counter() - started)
    a, r = statistics.median(acquire) * 1000, statistics.median(release) * 1000
    return {"buckets": args.buckets, "repeat": args.repeat, "acquire_p50_ms": round(a, 2),
            "release_p50_ms": round(r, 2), "per_round_ms": round(a + r, 2)}


def bench_planning(args, work: Path, store) -> dict:
    from tiering.enumerator.planner import RoundPlanner, TableInput
    from tiering.enumerator.positions import LakePosition
    from tiering.kvstore.models import BucketLog, Snapshot, TableInfo
    from tiering.source import checkpoint
    from tiering.state.offset import TieringOffset

    inputs = []
    for t in range(args.tables):
        info = TableInfo.model_validate(
            {"name": f"t{t:04d}", "table_id": t + 1, "schema": SCHEMA, "primary_key": ["id"], "num_buckets": args.buckets})
        tiered = t % 2 == 0  # half the tables are tiered (log splits), half bootstrap (snapshot + log)
        snaps = [Snapshot(bucket=b, snapshot_id=3, log_offset=500, files=[f"/s/{t}/{b}.parquet"], row_count=500,
                          size_bytes=50_000) for b in range(args.buckets)]
        logs = [BucketLog(bucket=b, log_start_offset=0, log_end_offset=1000 + b) for b in range(args.buckets)]
        lake = LakePosition(t + 1, {b: 800 for b in range(args.buckets)}) if tiered else None
        inputs.append(TableInput(info=info, snapshots=snaps, logs=logs, lake=lake))
    planner = RoundPlanner()
    plan_times, encode_times = [], []
    for _ in range(args.repeat):
        started = time.perf_counter()
        plan = planner.plan(1, inputs)
        plan_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        encoded = checkpoint(TieringOffset.initial("bench", 1), plan, lease_id="bench", epoch=1).to_json()
        encode_times.append(time.perf_counter() - started)
    p, e = statistics.median(plan_times) * 1000, statistics.median(encode_times) * 1000
    return {"tables": args.tables, "buckets_per_table": args.buckets, "splits": len(plan.splits),
            "plan_p50_ms": round(p, 1), "offset_json_p50_ms": round(e, 1), "offset_json_kb": round(len(encoded) / 1024, 1),
            "plan_vs_offset_json": round(p / e, 2)}


MODES = {"snapshot": bench_snapshot, "changelog": bench_changelog, "leases": bench_leases, "planning": bench_planning}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=sorted(MODES))
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--updates", type=int, default=1_000_000)
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--buckets", type=int, default=None, help="default: 8 (snapshot, changelog), 1000 (leases), 16 (planning)")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument(
        "--merge-max-changes", type=int, default=DEFAULT_MERGE_MAX_CHANGES,
        help="changelog: the writer's lake.merge_max_changes (0: Spark rewrites the buckets, as before the driver MERGE)",
    )
    parser.add_argument("--lake", choices=("local", "s3"), default="local",
                        help="snapshot: where the lake is (s3: an embedded S3 server on loopback)")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args()
    if args.buckets is None:
        args.buckets = {"leases": 1000, "planning": 16}.get(args.mode, 8)

    from tiering.kvstore.server.process import StoreProcess

    work = Path(tempfile.mkdtemp(prefix=f"bench-{args.mode}-"))
    store = StoreProcess.start(work / "store", gc_interval_s=3600) if args.mode != "planning" else None
    try:
        result = {"benchmark": args.mode, **MODES[args.mode](args, work, store),
                  "python": platform.python_version(), "cpus": os.cpu_count()}
    finally:
        if store is not None:
            store.stop()
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
