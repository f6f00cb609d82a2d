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
- ``changelog --keys K --updates U [--repeat R]``: K keys tiered, then R times: U upserts over
  them, a round of a continuous job (Spark's ``triggerExecution`` of the one batch that carries
  them: the writes are made between two triggers, ``CHANGELOG_TRIGGER_S`` apart) and a
  hand-written ``DeltaTable.merge`` of the same changes (read the log segments with pyarrow,
  keep the latest change per key, MERGE), written with the service's Parquet codec
  (``lake.compression``; ``compression`` in the JSON); then R times the same with an availableNow
  run per round (``available_now_*``: each run starts a query, whose planning process opens the
  lake afresh; the run with its query start is reported apart). Medians of the R, after one
  untimed round and MERGE (the process's first of each pays for warming pyarrow and DataFusion
  up). A round is Spark's trigger: its batch (``service_batches_s``: the round's reads, writes,
  commit and store calls) and what Spark does around it (``service_outside_batch_s``: planning,
  the offsets and commit logs), a fixed cost the MERGE does not pay.
  ``--driver-max-changes 0`` makes the executors write the buckets instead of the driver
  (``--merge-max-changes``, its older name, still works and says so);
- ``empty-round``: one tiered table (8 buckets, 100k rows) under a continuous job; the wall
  time of rounds where nothing changed (Spark's ``triggerExecution``: planning, no batch) and of
  rounds carrying one changed row (planning, the batch, the MERGE, the report, the release);
- ``tables --counts 10,50,200`` (up to 1,000 and 10,000): per count, that many tables of 4
  buckets, tiered once (``bootstrap_s``); then a continuous job over them with nothing
  changing: its first trigger (every table's lake read once), the empty rounds after it (p50,
  max) and the peak RSS of the driver's Python and JVM meanwhile; then (counts up to
  ``--changed-max``) a few rows changed in every table between two triggers of a running job,
  twice: the wall time of the second round that tiers them all (``triggerExecution``, Spark's
  breakdown; the term's first is ``first_round_ms``), per table, and the bytes of the offsets
  entry Spark wrote for it; ``--lake s3`` puts the lake on an embedded S3 server, and
  ``--s3-latency-ms N`` every request to it N ms away (a proxy process in front of it: loopback
  answers in well under a millisecond, S3 in tens, and a round's requests wait one after another
  where nothing runs them side by side); ``--table-parallelism N`` sets ``lake.table_parallelism``;
- ``lag --rate R --duration S``: a steady writer of R rows/s (upserts) while a continuous job
  runs with the default trigger: seconds from each write's acknowledgement to the lake reaching
  its offsets, p50/p99/max;
- ``leases --buckets B``: a ``JobLease`` acquire of B snapshots + release of B buckets;
- ``planning --tables T --buckets B``: ``RoundPlanner.plan`` over T x B synthetic buckets vs.
  encoding the resulting offset as JSON (what Spark writes to the checkpoint every round).

Run: .venv/bin/python benchmarks/bench_tiering.py MODE [options]; `benchmarks/run_all.py` runs
them all and writes the results.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.rss import peak_rss_mb  # noqa: E402

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from tiering.conf.model import DEFAULT_DRIVER_MAX_CHANGES  # noqa: E402
from tiering.kvstore.models import TableSpec  # noqa: E402

CHUNK = 250_000
SCHEMA = [
    {"name": "id", "type": "bigint"},
    {"name": "name", "type": "string"},
    {"name": "qty", "type": "int"},
    {"name": "price", "type": "double"},
]


def rows(ids: pa.Array, salt: int = 0) -> pa.Table:
    return pa.table(
        {
            "id": ids,
            "name": pc.binary_join_element_wise(f"name-{salt}-", pc.cast(ids, pa.string()), ""),
            "qty": pc.cast(pc.bit_wise_and(pc.add(ids, salt), 1023), pa.int32()),
            "price": pc.multiply(pc.cast(ids, pa.float64()), 0.01 + salt),
        }
    )

    return None


def reset_peak(pid: int) -> None:
    """Reset VmHWM to the current RSS (Linux: ``5`` into clear_refs), so the next peak is the run's."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        pass


def spark_session(memory: str = "2g"):
    from pyspark.sql import SparkSession

    from tiering.job import PROGRESS_RETENTION

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("bench-tiering")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .config("spark.driver.memory", memory)
        # Spark's default: the modes find their rounds in recentProgress by position, which the
        # job's own retention (tiering.job.PROGRESS_RETENTION) would cut short.
        .config(PROGRESS_RETENTION[0], "100")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def jvm_pid(spark) -> int | None:
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    return proc.pid if proc is not None else None


def service_config(work: Path, store_url: str, job: str, settings: dict | None = None, **lake: object):
    """An availableNow config of ``job`` (``settings``: dotted keys over that; ``lake``: [lake] keys)."""
    from tiering.conf.loader import load_config

    return load_config(
        None,
        {},
        {
            "lake.root": str(work / "lake"),
            **{f"lake.{key}": value for key, value in lake.items()},
            "job.name": job,
            "job.checkpoint": str(work / f"ckpt-{job}"),
            "kvstore.url": store_url,
            "zookeeper.hosts": "127.0.0.1:1",  # unused: the job runs as epoch 1 without an election
            "trigger.available_now": True,
            "lease.duration_s": 600.0,
            **(settings or {}),
        },
    )


def lake_settings(args, work: Path, stack) -> dict:
    """``lake.root`` (and ``lake.storage``) for ``--lake``: a local directory, or a fresh embedded
    S3 server that ``stack`` stops at the end."""
    if args.lake == "local":
        return {"root": str(work / "lake")}
    from tiering.objectstore.embedded_s3 import EmbeddedS3

    s3 = stack.enter_context(EmbeddedS3(bucket="bench").start(work / "s3"))
    storage = s3.storage_options()
    if args.s3_latency_ms:
        storage["AWS_ENDPOINT_URL"] = stack.enter_context(_delaying_proxy(s3.endpoint, args.s3_latency_ms))
    return {"root": f"{s3.root}/lake", "storage": storage}


@contextlib.contextmanager
def _delaying_proxy(upstream: str, delay_ms: float) -> Iterator[str]:
    """A proxy process in front of ``upstream`` delaying every request by ``delay_ms`` (loopback
    answers in a fraction of a millisecond, a real S3 in tens): yields its URL."""
    proxy = subprocess.Popen(
        [sys.executable, "-m", "tests.support.fault_proxy", upstream, "--delay-ms", str(delay_ms)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        yield proxy.stdout.readline().strip()
    finally:
        proxy.kill()
        proxy.wait()


def load_table(client, name: str, ids: range, buckets: int) -> None:
    from tiering.kvstore.models import TableSpec

    client.create_table(
        TableSpec.model_validate({"name": name, "schema": SCHEMA, "primary_key": ["id"], "num_buckets": buckets})
    )
    for start in range(ids.start, ids.stop, CHUNK):
        client.write_arrow(name, rows(pa.array(range(start, min(start + CHUNK, ids.stop)), pa.int64())))


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
    schema = lake_schema(_info(len(snapshots.buckets)))
    create_table_with_add_actions(str(table_dir), Schema.from_arrow(schema), adds, partition_by=["__bucket"])
    return time.perf_counter() - started


def baseline_copy(snapshots, lake, name: str) -> float:
    """The same copy without the service, by hand: pyarrow reads the snapshot files, delta-rs
    writes them partitioned by ``__bucket`` into ``name`` under the same lake, in one commit."""
    from deltalake import write_deltalake

    from tiering.lake.buckets import file_schema

    schema = file_schema(_info(len(snapshots.buckets))).append(pa.field("__bucket", pa.int32()))

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


def _info(buckets: int):
    from tiering.kvstore.models import TableInfo

    return TableInfo.model_validate(
        {"name": "b", "table_id": 1, "schema": SCHEMA, "primary_key": ["id"], "num_buckets": buckets}
    )


@dataclass
class ServiceRun:
    """One availableNow run: its wall time (query start to stop), the time of its rounds alone
    (Spark's ``triggerExecution`` of the batches that carried splits), and its result."""

    wall_s: float
    rounds_s: float
    result: object


def run_service(spark, config, epoch: int = 1) -> ServiceRun:
    from tiering.context import TermContext
    from tiering.job import TieringJob

    job = TieringJob(spark, TermContext.begin(config, epoch))
    started = time.perf_counter()
    result = job.run()
    elapsed = time.perf_counter() - started
    if not result.ok:
        raise RuntimeError(f"service run failed: {result.failed_tables}")
    rounds = (
        sum(b.durationMs["triggerExecution"] for b in job.query.recentProgress if "addBatch" in b.durationMs) / 1000
    )
    return ServiceRun(elapsed, rounds, result)


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


class ChangelogRounds:
    """The changelog benchmark's two sides over the same store table: U upserts at a time, then
    the service's round of them and a hand-written MERGE of the same changes (written with
    ``writer_properties``: None is delta-rs's default, snappy)."""

    def __init__(self, args, work: Path, client, writer_properties=None) -> None:
        self.args, self.client = args, client
        self.writer_properties = writer_properties
        self.target = str(work / "merge-target")
        self.rng = random.Random(7)
        self.salt = 0

    def updates(self) -> list[pa.Table]:
        """The next U upserts, built before any is written (each write changes distinct keys;
        writes overlap each other)."""
        chunks, made = [], 0
        while made < self.args.updates:
            self.salt += 1
            n = min(self.args.keys, self.args.updates - made, CHUNK)
            chunks.append(rows(pa.array(self.rng.sample(range(self.args.keys), n), pa.int64()), self.salt))
            made += n
        return chunks

    def ends(self) -> dict[int, int]:
        return {b.bucket: b.log_end_offset for b in self.client.log_info("cl").buckets}

    def write(self, chunks: list[pa.Table]) -> tuple[dict[int, int], int]:
        """Write ``chunks``; each bucket's log end before them, and the changes they made."""
        before = self.ends()
        for chunk in chunks:
            self.client.write_arrow("cl", chunk)
        return before, sum(end - before[b] for b, end in self.ends().items())

    def merge(self, before: dict[int, int]) -> tuple[float, int]:
        """The baseline: read each bucket's changes since ``before`` from the log segments, keep
        the newest per key, MERGE them into a plain Delta table; seconds, and the keys merged."""
        from deltalake import DeltaTable

        started = time.perf_counter()
        log = pa.concat_tables(
            [  # offsets are per bucket
                read.filter(pc.greater_equal(read["__offset"], pa.scalar(before[b.bucket], pa.int64())))
                for b in self.client.log_info("cl").buckets
                for seg in self.client.log_segments("cl", b.bucket, before[b.bucket], b.log_end_offset)
                for read in [pq.read_table(seg.file, columns=["id", "name", "qty", "price", "__offset"])]
            ]
        )
        newest = log.group_by("id").aggregate([("__offset", "max")])
        latest = log.join(newest, keys=["id", "__offset"], right_keys=["id", "__offset_max"], join_type="inner").drop(
            ["__offset"]
        )
        (
            DeltaTable(self.target)
            .merge(
                latest,
                predicate="t.id = s.id",
                source_alias="s",
                target_alias="t",
                writer_properties=self.writer_properties,
            )
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        return time.perf_counter() - started, latest.num_rows


#: The continuous job's trigger in the changelog benchmark: long enough for U upserts to be
#: written between two triggers, so each round carries all of them.
CHANGELOG_TRIGGER_S = 10.0


def bench_changelog(args, work: Path, store) -> dict:
    from deltalake import write_deltalake

    from tiering.delta_log.lake import Lake
    from tiering.enumerator.positions import LakePosition
    from tiering.lake.compression import delta_rs_properties

    client = store.client(timeout_s=600)
    load_table(client, "cl", range(args.keys), args.buckets)
    snapshots = client.take_snapshots("cl")
    spark = spark_session()
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "0")  # a progress report per idle trigger
    config = service_config(work, store.url, "bench-changelog", driver_max_changes=args.driver_max_changes)
    codec = delta_rs_properties(config.lake.compression)  # the MERGE writes the service's codec: like with like
    run_service(spark, config)  # bootstrap, untimed
    table_id = client.log_info("cl").table_id
    base = pa.concat_tables([pq.read_table(f) for s in snapshots.buckets for f in s.files]).select(
        ["id", "name", "qty", "price"]
    )
    # the baseline's target: the same base rows
    write_deltalake(str(work / "merge-target"), base, writer_properties=codec)
    bench = ChangelogRounds(args, work, client, codec)
    lake = Lake.of(config.lake)
    rounds, batches, merges, keys_merged = [], [], [], 0

    continuous = service_config(
        work,
        store.url,
        "bench-changelog",
        {"trigger.available_now": False, "trigger.interval_s": CHANGELOG_TRIGGER_S},
        driver_max_changes=args.driver_max_changes,
    )
    with ContinuousJob(spark, continuous, epoch=2) as running:
        attempts, warming_up = 0, True  # the first round the driver writes and the first MERGE: untimed
        while len(rounds) < args.repeat:
            attempts += 1
            if attempts > 2 * args.repeat + 1:
                raise RuntimeError("benchmark: the writes kept straddling two triggers; raise CHANGELOG_TRIGGER_S")
            chunks = bench.updates()
            seen = len(running.batches())
            wait_for(
                lambda: any("addBatch" not in b.durationMs for b in running.batches()[seen:]), what="an idle trigger"
            )
            written_from = len(running.batches())
            before, changes = bench.write(chunks)
            after = bench.ends()
            wait_for(
                lambda: (lake.position("cl", table_id) or LakePosition(table_id)).buckets == after,
                timeout_s=300,
                what="the round in the lake",
            )
            carried = wait_for(
                lambda: [b for b in running.batches()[written_from:] if "addBatch" in b.durationMs],
                what="the round's progress report",
            )
            if running.error is not None:
                raise running.error
            merge_s, keys_merged = bench.merge(before)
            if not warming_up:
                merges.append(merge_s)
                if len(carried) == 1:  # else the writes straddled a trigger: two rounds, not measured
                    rounds.append(carried[0].durationMs["triggerExecution"] / 1000)
                    batches.append(carried[0].durationMs["addBatch"] / 1000)
            warming_up = False

    available_now, runs = [], []
    for epoch in range(3, args.repeat + 3):  # an availableNow run per round, as a scheduler starts them
        before, changes = bench.write(bench.updates())
        run = run_service(spark, config, epoch=epoch)
        available_now.append(run.rounds_s)
        runs.append(run.wall_s)
        merges.append(bench.merge(before)[0])
    spark.stop()
    service_s, baseline_s = statistics.median(rounds), statistics.median(merges)
    available_now_s = statistics.median(available_now)
    return {
        "keys": args.keys,
        "buckets": args.buckets,
        "driver_max_changes": args.driver_max_changes,
        "changes": changes,
        "distinct_keys_changed": keys_merged,
        "repeat": args.repeat,
        "compression": config.lake.compression,
        "service_s": round(service_s, 3),
        "service_changes_per_s": round(changes / service_s),
        "service_rounds_s": [round(r, 3) for r in rounds],
        "service_batches_s": [round(b, 3) for b in batches],
        "service_outside_batch_s": [round(r - b, 3) for r, b in zip(rounds, batches, strict=False)],
        "available_now_round_s": round(available_now_s, 3),
        "available_now_rounds_s": [round(r, 3) for r in available_now],
        "run_with_query_start_s": round(statistics.median(runs), 3),
        "baseline_merge_s": round(baseline_s, 3),
        "baseline_changes_per_s": round(changes / baseline_s),
        "baseline_merges_s": [round(m, 3) for m in merges],
        "service_vs_baseline_throughput": round(baseline_s / service_s, 3),
        "available_now_vs_baseline_throughput": round(baseline_s / available_now_s, 3),
    }


def bench_leases(args, work: Path, store) -> dict:
    from tiering.kvstore.models import SnapshotRef
    from tiering.lease.job_lease import JobLease

    client = store.client()
    info = client.create_table(
        TableSpec.model_validate(
            {"name": "leased", "schema": SCHEMA, "primary_key": ["id"], "num_buckets": args.buckets}
        )
    )
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
    from tiering.kvstore.models import BucketLog, Snapshot, TableInfo
    from tiering.source import checkpoint

    inputs = []
    for t in range(args.tables):
        info = TableInfo.model_validate(
            {
                "name": f"t{t:04d}",
                "table_id": t + 1,
                "schema": SCHEMA,
                "primary_key": ["id"],
                "num_buckets": args.buckets,
            }
        )
        tiered = t % 2 == 0  # half the tables are tiered (log splits), half bootstrap (snapshot + log)
        snaps = [
            Snapshot(
                bucket=b, snapshot_id=3, log_offset=500, files=[f"/s/{t}/{b}.parquet"], row_count=500, size_bytes=50_000
            )
            for b in range(args.buckets)
        ]
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


class ContinuousJob:
    """A continuous ``TieringJob`` on its own thread; its Spark progress reports, and a clean stop."""

    def __init__(self, spark, config, epoch: int = 1) -> None:
        from tiering.context import TermContext
        from tiering.job import TieringJob

        self.job = TieringJob(spark, TermContext.begin(config, epoch))
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="bench-job", daemon=True)

    def __enter__(self) -> ContinuousJob:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self._thread.join(120)

    def _run(self) -> None:
        try:
            self.job.run(self.stopping)
        except BaseException as e:  # noqa: BLE001 - reported by the benchmark
            self.error = e

    def batches(self) -> list:
        query = self.job.query
        return list(query.recentProgress) if query is not None else []


def wait_for(condition, timeout_s: float = 120.0, what: str = "condition", every_s: float = 0.05):
    """``condition()``'s first true value, asked every ``every_s`` (a query's progress is parsed
    on each ask: while a round of hundreds of tables runs, ask seldom, its driver needs the GIL)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every_s)
    raise RuntimeError(f"benchmark: timed out after {timeout_s:.0f}s waiting for {what}")


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
        wait_for(lambda: lake.position("one", 1), what="the bootstrap")
        wait_for(
            lambda: sum(1 for b in running.batches() if "addBatch" not in b.durationMs) >= args.repeat + 2,
            what="idle rounds",
        )
        idle = [b.durationMs["triggerExecution"] for b in running.batches() if "addBatch" not in b.durationMs][2:]
        one_row = []
        for i in range(args.repeat):
            seen = len(running.batches())
            written = client.upsert("one", [{"id": i, "name": f"changed-{i}", "qty": i, "price": 1.0}])
            ((bucket, (_, end)),) = written.buckets.items()
            wait_for(
                lambda: (lake.position("one", 1) or LakePosition(1)).buckets.get(int(bucket), 0) >= end,
                what="the changed row in the lake",
            )
            batch = wait_for(
                lambda: next((b for b in running.batches()[seen:] if "addBatch" in b.durationMs), None),
                what="the round's progress report",
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
        wait_for(enough, timeout_s=600, what="idle rounds", every_s=0.5)
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
        wait_for(lambda: running.batches() or running.error, timeout_s=600, what="the first trigger")
        for _ in range(2):
            seen = len(running.batches())
            _write_changes(client, names)
            rounds.append(
                wait_for(
                    lambda: (
                        next((b for b in running.batches()[seen:] if "addBatch" in b.durationMs), None) or running.error
                    ),
                    timeout_s=600,
                    what="the changed round",
                    every_s=1.0,
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
        wait_for(lambda: lake.load("steady") is not None, what="the bootstrap")
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


def _elsewhere(module: str, function: str):
    """A mode living in a module of its own (which imports this one's helpers), imported when run."""

    def run(args, work: Path, store) -> dict:
        return getattr(importlib.import_module(module), function)(args, work, store)

    return run


MODES = {
    "snapshot": bench_snapshot,
    "changelog": bench_changelog,
    "leases": bench_leases,
    "planning": bench_planning,
    "empty-round": bench_empty_round,
    "tables": bench_tables,
    "lag": bench_lag,
    "amplification": _elsewhere("benchmarks.bench_amplification", "bench_amplification"),
    "cluster": _elsewhere("benchmarks.bench_cluster", "bench_cluster"),
}


def run_mode(mode: str, run, args, *, with_store: bool = True) -> dict:
    """``run(args, work, store)`` in a fresh work directory, with a store process of its own
    unless ``with_store`` is false; its JSON printed, and written to ``args.out`` when given."""
    from tiering.kvstore.server.process import StoreProcess

    work = Path(tempfile.mkdtemp(prefix=f"bench-{mode}-"))
    store = StoreProcess.start(work / "store", gc_interval_s=3600) if with_store else None
    try:
        result = {
            "benchmark": mode,
            **run(args, work, store),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        }
    except BaseException:
        print(f"bench {mode}: failed; its files and logs are kept in {work}", file=sys.stderr)
        raise
    finally:
        if store is not None:
            store.stop()
    shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
    return result


class _RenamedFlag(argparse.Action):
    """A flag under its older name: it sets the new one's value and says what replaced it."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(
            f"bench: {option_string} is now --{self.dest.replace('_', '-')} (lake.{self.dest}); "
            f"{option_string} {values} taken as --{self.dest.replace('_', '-')} {values}",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=sorted(MODES))
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--updates", type=int, default=1_000_000)
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument(
        "--buckets", type=int, default=None, help="default: 8 (snapshot, changelog), 1000 (leases), 16 (planning)"
    )
    parser.add_argument(
        "--repeat", type=int, default=None, help="default: 3 (changelog: rounds, medians reported), 10 otherwise"
    )
    parser.add_argument(
        "--driver-max-changes",
        type=int,
        default=DEFAULT_DRIVER_MAX_CHANGES,
        help="changelog, tables: the service's lake.driver_max_changes (0: Spark's executors rewrite the buckets)",
    )
    parser.add_argument(
        "--merge-max-changes",
        type=int,
        action=_RenamedFlag,
        dest="driver_max_changes",
        help="the older name of --driver-max-changes (lake.merge_max_changes was split)",
    )
    parser.add_argument("--counts", default="10,50,200", help="tables: the table counts to measure, comma-separated")
    parser.add_argument(
        "--changed-max",
        type=int,
        default=1000,
        help="tables: the largest count whose changed round is measured (larger ones: idle rounds only)",
    )
    parser.add_argument("--rate", type=int, default=5000, help="lag: rows written per second")
    parser.add_argument("--duration", type=float, default=60.0, help="lag: seconds of steady writing")
    parser.add_argument(
        "--lake",
        choices=("local", "s3"),
        default="local",
        help="snapshot, tables: where the lake is (s3: an embedded S3 server on loopback)",
    )
    parser.add_argument(
        "--table-parallelism", type=int, default=None, help="tables: lake.table_parallelism (default: the service's)"
    )
    parser.add_argument(
        "--s3-latency-ms",
        type=float,
        default=0.0,
        help="with --lake s3: every request to it delayed this long (a proxy process in front of it)",
    )
    parser.add_argument(
        "--small-keys",
        type=int,
        default=200_000,
        help="amplification: rows of the small table (--keys: rows of the big one)",
    )
    parser.add_argument(
        "--target-file-mb", type=int, default=None, help="amplification: lake.target_file_mb (default: the service's)"
    )
    parser.add_argument(
        "--compression",
        choices=("zstd", "snappy", "lz4", "gzip", "none"),
        default=None,
        help="amplification: the Parquet codec of the service and the MERGE (default: the service's)",
    )
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args()
    if args.buckets is None:
        args.buckets = {"leases": 1000, "planning": 16}.get(args.mode, 8)
    if args.repeat is None:
        args.repeat = 3 if args.mode == "changelog" else 10

    run_mode(args.mode, MODES[args.mode], args, with_store=args.mode != "planning")


if __name__ == "__main__":
    main()
