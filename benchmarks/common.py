"""What the benchmarks share: their data, the driver's Spark, the job's config, runs of the job,
and one way of writing a result.

Failure mode it exists for: two benchmarks that measure "the same" service differently (another
Spark config, another lease, other rows), so that their figures no longer compare; and a
benchmark that hangs instead of failing when the job it drives died (:class:`Worker` keeps a
thread's error for the thread that waits, and every wait has a deadline). Configs and waits
build on the tests' own helpers (:mod:`tests.support.config`, :mod:`tests.support.waiting`).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from tests.support.config import job_config
from tiering.allocator import ALLOCATOR_ENV

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
#: Rows written to the store per call.
CHUNK = 250_000
SCHEMA = [
    {"name": "id", "type": "bigint"},
    {"name": "name", "type": "string"},
    {"name": "qty", "type": "int"},
    {"name": "price", "type": "double"},
]
#: A benchmark's waits (``wait_until(..., **POLL)``): often, since a round's end is what is timed.
POLL = {"timeout_s": 120.0, "interval_s": 0.05}
#: ZooKeeper of a job run in the benchmark's process as epoch N without an election: never dialled.
NO_ZOOKEEPER = "127.0.0.1:1"


def rows(ids: pa.Array, salt: int = 0) -> pa.Table:
    """Rows of :data:`SCHEMA` for ``ids``; another ``salt`` changes every column but the key."""
    return pa.table(
        {
            "id": ids,
            "name": pc.binary_join_element_wise(f"name-{salt}-", pc.cast(ids, pa.string()), ""),
            "qty": pc.cast(pc.bit_wise_and(pc.add(ids, salt), 1023), pa.int32()),
            "price": pc.multiply(pc.cast(ids, pa.float64()), 0.01 + salt),
        }
    )


def load_table(client, name: str, ids: range, buckets: int) -> None:
    """A store table ``name`` of :data:`SCHEMA` in ``buckets`` buckets holding ``ids``."""
    from tiering.kvstore.models import TableSpec

    client.create_table(
        TableSpec.model_validate({"name": name, "schema": SCHEMA, "primary_key": ["id"], "num_buckets": buckets})
    )
    for start in range(ids.start, ids.stop, CHUNK):
        client.write_arrow(name, rows(pa.array(range(start, min(start + CHUNK, ids.stop)), pa.int64())))


def table_info(buckets: int):
    """The store's description of a :data:`SCHEMA` table of ``buckets`` buckets, as the seam has it."""
    from tiering.kvstore.models import TableInfo
    from tiering.kvstore.reference import store_table

    return store_table(
        TableInfo.model_validate(
            {"name": "b", "table_id": 1, "schema": SCHEMA, "primary_key": ["id"], "num_buckets": buckets}
        )
    )


def spark_session(memory: str = "2g", extra: dict[str, str] | None = None):
    """The driver's local[2] Spark, as every benchmark measures it (``extra``: more of its conf,
    such as a store client's jar on ``spark.jars``)."""
    from pyspark.sql import SparkSession

    from tiering.job import PROGRESS_RETENTION, REQUIRED_SPARK_CONF

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("bench-tiering")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config(map=REQUIRED_SPARK_CONF)
        .config("spark.driver.memory", memory)
        # Spark's default: the modes find their rounds in recentProgress by position, which the
        # job's own retention (tiering.job.PROGRESS_RETENTION) would cut short.
        .config(PROGRESS_RETENTION[0], "100")
        .config(map=extra or {})
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def jvm_pid(spark) -> int | None:
    """The pid of the driver's JVM (None when Spark did not start it from this process)."""
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    return proc.pid if proc is not None else None


def service_config(work: Path, store_url: str, job: str, settings: dict | None = None, **lake: object):
    """An availableNow config of ``job`` (``settings``: dotted keys over that; ``lake``: [lake] keys)."""
    return job_config(
        work,
        store_url,
        NO_ZOOKEEPER,
        job,
        **{
            **{f"lake.{key}": value for key, value in lake.items()},
            "job.checkpoint": str(work / f"ckpt-{job}"),
            "lease.duration_s": 600.0,
            **(settings or {}),
        },
    )


def lake_settings(args, work: Path, stack: contextlib.ExitStack) -> dict:
    """``lake.root`` (and ``lake.storage``) for ``--lake``: a local directory, or a fresh embedded
    S3 server that ``stack`` stops at the end (``--s3-latency-ms``: behind a delaying proxy)."""
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
        cwd=REPO,
    )
    try:
        yield proxy.stdout.readline().strip()
    finally:
        proxy.kill()
        proxy.wait()


@dataclass
class ServiceRun:
    """One availableNow run: its wall time (query start to stop), the time of its rounds alone
    (Spark's ``triggerExecution`` of the batches that carried splits), and its result;
    ``phases_ms``: those batches' Spark phases summed (``latestOffset``: planning, ``addBatch``:
    the round's reads, writes and commits, ...)."""

    wall_s: float
    rounds_s: float
    result: object
    phases_ms: dict[str, int] = field(default_factory=dict)


def run_service(spark, config, epoch: int = 1) -> ServiceRun:
    """An availableNow ``TieringJob`` of ``config`` as ``epoch``, timed; a failed table fails it."""
    from tiering.context import TermContext
    from tiering.job import TieringJob

    job = TieringJob(spark, TermContext.begin(config, epoch))
    started = time.perf_counter()
    result = job.run()
    elapsed = time.perf_counter() - started
    if not result.ok:
        raise RuntimeError(f"service run failed: {result.failed_tables}")
    batches = [b.durationMs for b in job.query.recentProgress if "addBatch" in b.durationMs]
    phases = {name: sum(b.get(name, 0) for b in batches) for name in sorted({n for b in batches for n in b})}
    return ServiceRun(elapsed, phases.get("triggerExecution", 0) / 1000, result, phases)


class Worker(threading.Thread):
    """A daemon thread run as a context (started on entry, stopped and joined on exit) whose
    error is kept for the main thread, which checks it between waits instead of hanging."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.stopping.set()
        self.join(120)

    def run(self) -> None:
        try:
            self.work()
        except BaseException as e:  # noqa: BLE001 - reported by the benchmark
            self.error = e

    def work(self) -> None:
        raise NotImplementedError


class ContinuousJob(Worker):
    """A continuous ``TieringJob`` on its own thread; its Spark progress reports, and a clean stop."""

    def __init__(self, spark, config, epoch: int = 1) -> None:
        from tiering.context import TermContext
        from tiering.job import TieringJob

        super().__init__("bench-job")
        self.job = TieringJob(spark, TermContext.begin(config, epoch))

    def work(self) -> None:
        self.job.run(self.stopping)

    def batches(self) -> list:
        query = self.job.query
        return list(query.recentProgress) if query is not None else []

    def last_report(self) -> str | None:
        """When the query's newest progress report was made (None before its first): one report
        read, where :meth:`batches` has the JVM serialize each of the recent ones and this
        process parse them, a cost the round being measured would share its cores with."""
        query = self.job.query
        last = query.lastProgress if query is not None else None
        return last.timestamp if last is not None else None


def machine() -> dict:
    """What the figures were measured on."""
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}


def wakeup_ms(client, idle_s: float = 4.0) -> dict[str, float]:
    """The store's answer to its first request after ``idle_s`` idle, and to one right after it
    (ms; idle shorter than the server's keep-alive, so no new connection). On some machines a
    process woken after seconds idle answers tens of ms late, whatever it runs: a continuous job's
    round pays that in each of its processes at every trigger, a MERGE in a busy process does not.
    It names the spell a figure was taken in."""

    def timed() -> float:
        started = time.perf_counter()
        client.health()
        return (time.perf_counter() - started) * 1000

    timed()
    time.sleep(idle_s)
    first = timed()
    return {"idle_s": idle_s, "first_ms": round(first, 1), "then_ms": round(timed(), 1)}


def write_json(path: Path, report: dict) -> str:
    """``report`` as indented JSON at ``path`` (its folder made); the text written."""
    text = json.dumps(report, indent=2)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    return text


def run_mode(mode: str, run: Callable, args, *, with_store: bool = True) -> dict:
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
            "allocator_env": {name: os.environ.get(name) for name in ALLOCATOR_ENV},
        }
    except BaseException:
        print(f"bench {mode}: failed; its files and logs are kept in {work}", file=sys.stderr)
        raise
    finally:
        if store is not None:
            store.stop()
    shutil.rmtree(work, ignore_errors=True)
    text = write_json(args.out, result) if args.out else json.dumps(result, indent=2)
    print(text)
    return result
