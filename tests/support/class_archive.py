"""The class-data-sharing archive of a virtualenv's Spark, made once per venv by scripts/setup_tests.sh.

Before a Spark driver runs anything it loads, parses and verifies some thousands of Spark's
classes, and the suite starts a driver in most integration tests (the job's own processes, the
test sessions, spark-submit): on a 2-core CI machine that work, repeated in every JVM, is most of
the suite's CPU. A JVM started with ``-XX:SharedArchiveFile`` maps the classes an earlier JVM
archived at its exit instead (JDK 13+ dynamic archives over the JDK's own base archive).

The archive belongs to one pyspark install (one classpath, jar for jar) and one JDK build; a JVM
whose classpath differs (a standalone cluster's conf directory, ``spark.driver.extraClassPath``)
or whose archive is stale maps nothing and starts as it would without it, silently: the JVM's CDS
log is turned off, since its warnings go to standard output, which tests read.

``python -m tests.support.class_archive`` (with the venv's python) writes the archive, at
:func:`archive_path`, from a driver that runs what the tests' drivers run: SQL with code
generation, Arrow conversions, Parquet, a Python data source read by a streaming query with
``foreachBatch`` and its checkpoint, and, when the run names the Delta jars
(:data:`tests.support.delta_spark.JARS_ENV`), a Delta table written and read by Spark.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

#: Where a venv keeps its archive: inside the venv, so a rebuilt venv never meets an old one.
ARCHIVE_NAME = "spark-classes.jsa"

#: The JVM's CDS log off: a stale or mismatched archive is skipped without a word on stdout.
QUIET = "-Xlog:cds=off,cds+dynamic=off"


def archive_path(prefix: str = sys.prefix) -> Path:
    """The archive of the venv at ``prefix`` (it may not exist)."""
    return Path(prefix) / ARCHIVE_NAME


def archive_options(prefix: str = sys.prefix) -> str:
    """The JVM options that map the venv's archive, or "" when it has none."""
    archive = archive_path(prefix)
    return f"-XX:SharedArchiveFile={archive} {QUIET}" if archive.is_file() else ""


def _workload(work: Path) -> None:
    """Runs in a driver started with ``-XX:ArchiveClassesAtExit``: what it loads is archived."""
    import pyarrow as pa
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    from tests.support.delta_spark import delta_spark_conf

    class _Source(DataSource):
        @classmethod
        def name(cls) -> str:
            return "class_archive_source"

        def schema(self) -> str:
            return "k long, v string"

        def streamReader(self, schema):
            return _Reader()

    class _Reader(DataSourceStreamReader):
        def initialOffset(self) -> dict:
            return {"n": 0}

        def latestOffset(self) -> dict:
            return {"n": 2}

        def partitions(self, start: dict, end: dict) -> list[InputPartition]:
            return [InputPartition(i) for i in range(start["n"], end["n"])]

        def read(self, partition):
            yield (partition.value, str(partition.value))

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("class-archive")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.warehouse.dir", str(work / "warehouse"))
        .config(map=delta_spark_conf())
        .getOrCreate()
    )
    spark.range(1000).selectExpr("id % 7 AS k", "id AS v").groupBy("k").agg({"v": "sum"}).orderBy("k").collect()
    frame = spark.createDataFrame(pa.table({"k": [1, 2, 3], "v": ["a", "b", "c"]}))
    frame.write.parquet(str(work / "parquet"))
    spark.read.parquet(str(work / "parquet")).filter("k > 1").toArrow()
    spark.dataSource.register(_Source)
    query = (
        spark.readStream.format("class_archive_source")
        .load()
        .writeStream.foreachBatch(lambda batch, _: batch.collect())
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if delta_spark_conf():
        frame.write.format("delta").save(str(work / "delta"))
        spark.read.format("delta").load(str(work / "delta")).collect()
    spark.stop()


def write_archive(prefix: str = sys.prefix) -> Path:
    """Runs the workload in a driver of this interpreter's pyspark and keeps the archive its JVM
    writes at exit; raises RuntimeError with the driver's errors when it fails or its JVM writes no
    archive (no archive is kept). The driver's JVM runs with the options of the tests' drivers
    (:data:`tests.support.jvm.JVM_OPTIONS`): the archive is made for them, and C2's compilations
    of the workload would cost CPU for code no archive keeps."""
    from tests.support.jvm import JVM_OPTIONS  # jvm imports this module

    archive = archive_path(prefix)
    partial = archive.with_suffix(".part")
    partial.unlink(missing_ok=True)
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_SUBMIT_OPTS": f"{JVM_OPTIONS} -XX:ArchiveClassesAtExit={partial} {QUIET}",
    }
    with tempfile.TemporaryDirectory(prefix="class-archive-") as work:
        driver = subprocess.run([sys.executable, "-c", _DRIVER, work], env=env, capture_output=True, text=True)
    if driver.returncode != 0:
        raise RuntimeError(f"the archive's driver failed (exit {driver.returncode}):\n{driver.stderr[-3000:]}")
    if not partial.is_file():
        raise RuntimeError(
            f"the archive's driver exited cleanly but its JVM wrote no archive at {partial} "
            f"(a JDK without dynamic archives, or a JVM that exited before the driver's end):\n{driver.stderr[-3000:]}"
        )
    partial.replace(archive)
    return archive


#: The driver's process: the workload, then the gateway JVM closed and waited for, since the JVM
#: writes the archive as it exits and pyspark does not wait for its JVM.
_DRIVER = """
import sys
from pathlib import Path
from pyspark import SparkContext
from tests.support.class_archive import _workload
_workload(Path(sys.argv[1]))
proc = SparkContext._gateway.proc
proc.stdin.close()
proc.wait()
"""


if __name__ == "__main__":
    print(f"class_archive: {write_archive()}")
