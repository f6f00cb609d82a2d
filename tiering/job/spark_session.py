"""The SparkSession a term runs in, and the settings its query needs from it.

Failure modes:
- a setting the lake writer relies on (UTC, microsecond timestamps) undone by the config's
  ``[spark]`` section: :data:`REQUIRED_SPARK_CONF` is applied last, so it wins;
- a checkpoint on S3 without hadoop-aws on Spark's classpath: refused by
  :func:`use_checkpoint_store` with a :class:`ConfigError` naming the jars, before the query
  starts, not as a Java stack trace mid-round;
- pyspark taking over SIGINT when the session starts (it cancels every job and raises
  ``KeyboardInterrupt`` wherever the main thread is): the process's own handler is put back.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import TypeVar

from tiering import spark_version
from tiering.allocator import ALLOCATOR_ENV
from tiering.conf.model import TieringConfig
from tiering.errors import ConfigError
from tiering.state.checkpoint_store import CheckpointStore

__all__ = [
    "REQUIRED_SPARK_CONF",
    "EXECUTOR_ALLOCATOR_CONF",
    "CHECKPOINT_FILE_MANAGER",
    "PROGRESS_RETENTION",
    "S3A_FILESYSTEM",
    "build_spark",
    "use_checkpoint_store",
]

#: Spark settings the lake writer relies on; the config's [spark] section may add, not undo.
REQUIRED_SPARK_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}

#: The executors' Python workers rewrite the buckets of large rounds with pyarrow: the allocator
#: setting the driver's process takes (:mod:`tiering.allocator`) for them too, unless ``[spark]``
#: sets it.
EXECUTOR_ALLOCATOR_CONF = {f"spark.executorEnv.{name}": value for name, value in ALLOCATOR_ENV.items()}

#: The streaming checkpoint is on the driver's filesystem or S3 (``job.checkpoint``). Spark's default
#: manager for it goes through Hadoop's FileContext, which without Hadoop's native library forks a
#: ``chmod`` and several ``readlink`` processes per file: ~35 ms for each of the two files a round
#: writes (offsets, commits). The FileSystem-based manager writes the same temp-file-then-rename
#: with one fork per file. On a local disk both check that the target is absent, then rename; on
#: S3 (an ``s3a://`` checkpoint) the FileSystem one writes through s3a, which copies on rename.
#: Its package depends on the Spark version (:mod:`tiering.spark_version`).
CHECKPOINT_FILE_MANAGER = (
    "spark.sql.streaming.checkpointFileManagerClass",
    spark_version.checkpoint_file_manager(spark_version.running()),
)

#: Spark keeps a query's last ``numRecentProgressUpdates`` progress events (default 100) for
#: ``recentProgress``, each with the source's start and end offset, and an idle trigger's offsets
#: are the last round's: after a 10,000-table bootstrap, 100 events carrying its splits stayed in
#: the JVM, and every ``recentProgress`` call parses them all in Python. The job reads none of
#: them; a few stay for a person looking at the query. A value set for the session (spark-submit,
#: the config's [spark] section) wins.
PROGRESS_RETENTION = ("spark.sql.streaming.numRecentProgressUpdates", "10")

T = TypeVar("T")


#: The class Spark's ``s3a`` filesystem is: hadoop-aws's jar (and the AWS SDK bundle it was built
#: against) must be on Spark's classpath for a checkpoint on S3 (deploy/jars/s3a/pom.xml).
S3A_FILESYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"


def use_checkpoint_store(spark, checkpoint: CheckpointStore) -> None:
    """Give the session what Spark needs to write ``checkpoint``: for one on S3, the ``fs.s3a.*``
    settings derived from the lake's storage options (a setting the session already has, as
    ``fs.s3a.x`` or ``spark.hadoop.fs.s3a.x``, wins), after checking that ``s3a`` is on the
    classpath; a :class:`ConfigError` naming the jars otherwise. Nothing for a local one."""
    settings = checkpoint.hadoop_conf()
    if not checkpoint.is_s3:
        return
    jvm = spark.sparkContext._jvm
    try:
        jvm.java.lang.Class.forName(S3A_FILESYSTEM, False, jvm.java.lang.Thread.currentThread().getContextClassLoader())
    except Exception:
        raise ConfigError(
            [
                f"job.checkpoint: {checkpoint.location!r} is on S3, "
                "and Spark writes its part through hadoop-aws's s3a, "
                f"which is not on Spark's classpath ({S3A_FILESYSTEM} "
                "not found): add hadoop-aws of the Hadoop inside "
                "pyspark and its AWS SDK bundle to spark.jars "
                "(scripts/setup_s3a.sh fetches them into deploy/jars/s3a/lib)"
            ]
        ) from None
    for key, value in settings.items():
        if spark.conf.get(key, None) is None and spark.conf.get(f"spark.hadoop.{key}", None) is None:
            spark.conf.set(key, value)


def build_spark(config: TieringConfig):
    """The SparkSession for ``config``: spark-submit's settings win, plain `python` gets local[*]."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(f"kv-tiering:{config.job.name}")
    if "PYSPARK_GATEWAY_PORT" not in os.environ and "spark.master" not in config.spark:
        builder = builder.master("local[*]")
    for key, value in {**EXECUTOR_ALLOCATOR_CONF, **config.spark, **REQUIRED_SPARK_CONF}.items():
        builder = builder.config(key, value)
    return _keeping_sigint(builder.getOrCreate)


def _keeping_sigint(start: Callable[[], T]) -> T:
    """``start()`` with the process's SIGINT handler kept. pyspark's SparkContext sets its own in
    the main thread: it cancels every job and raises ``KeyboardInterrupt`` wherever the thread is,
    mostly inside a py4j call, which logs it with its traceback; `tiering run`'s handler stops the
    job between rounds instead, as on SIGTERM."""
    if threading.current_thread() is not threading.main_thread():
        return start()
    previous = signal.getsignal(signal.SIGINT)
    try:
        return start()
    finally:
        signal.signal(signal.SIGINT, previous)
