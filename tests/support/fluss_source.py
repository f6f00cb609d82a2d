"""Our Spark source of Fluss KV snapshots (jvm/fluss-snapshot-source, format ``fluss-snapshot``)
read in a Spark driver of its own: a ``local[2]`` session whose spark.jars hold fluss-client and
our jar, as a job's driver would have them.

Why a process of its own: a Python process has one SparkContext, the tests' shared session's,
whose classpath has no Fluss jar. The driver (``python -m tests.support.fluss_source``) takes a
request (the reads and the classes to locate) and answers each read's rows as an Arrow file, the
buckets each Spark partition held, or the read's error; and where the driver's class loader loads
each class from. It runs on the pyspark the test process imports (``PYTHONPATH`` carries over), so
the same test runs on the oldest pyspark when that one comes first.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.support.drivers import REPO, driver_env
from tests.support.fluss import client_jar
from tests.support.fluss_java import class_location

FORMAT = "fluss-snapshot"
BUCKET_COLUMN = "__bucket"
#: the Spark partition each row was read in, added by the driver
PARTITION_COLUMN = "__partition"
MODULE_DIR = REPO / "jvm" / "fluss-snapshot-source"
DRIVER_TIMEOUT_S = 300


def source_jar() -> Path:
    """Our jar, built by scripts/setup_fluss_source.sh; the calling test skips without it."""
    built = sorted((MODULE_DIR / "target").glob("fluss-snapshot-source-*.jar"))
    if not built:
        pytest.skip(f"no fluss-snapshot-source jar in {MODULE_DIR}/target (scripts/setup_fluss_source.sh builds it)")
    return built[0]


def snapshot_options(bootstrap_servers: str, database: str, table: str, snapshots: dict[int, int]) -> dict[str, str]:
    """The source's options for reading ``snapshots`` (bucket -> snapshot id) of a table."""
    return {
        "bootstrap.servers": bootstrap_servers,
        "database": database,
        "table": table,
        **{f"snapshot.{bucket}": str(snapshot_id) for bucket, snapshot_id in snapshots.items()},
    }


@dataclass(frozen=True)
class SnapshotRead:
    """One read's answer: its rows (with :data:`PARTITION_COLUMN`) and Spark partition count, or
    its error's text."""

    rows: pa.Table | None
    partitions: int | None
    error: str | None


@dataclass(frozen=True)
class DriverAnswer:
    reads: list[SnapshotRead]
    #: class name -> the jar the driver's class loader loads it from
    classes: dict[str, str]


def read_snapshots(work: Path, reads: list[dict[str, str]], classes: tuple[str, ...] = ()) -> DriverAnswer:
    """Run the driver on ``reads`` (each the source's options) in ``work``; its log names why it failed."""
    request = {"jars": [str(client_jar()), str(source_jar())], "reads": reads, "classes": list(classes)}
    work.mkdir(parents=True, exist_ok=True)
    (work / "request.json").write_text(json.dumps(request))
    log = work / "driver.log"
    with open(log, "wb") as out:
        rc = subprocess.run(
            [sys.executable, "-m", "tests.support.fluss_source", str(work)],
            cwd=REPO,
            env=driver_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=DRIVER_TIMEOUT_S,
        ).returncode
    assert rc == 0, f"the snapshot-read driver exited with {rc}; {log}:\n{log.read_text()[-4000:]}"
    answer = json.loads((work / "answer.json").read_text())
    return DriverAnswer(
        reads=[
            SnapshotRead(
                rows=pa.ipc.open_file(work / f"read-{i}.arrow").read_all() if read["error"] is None else None,
                partitions=read["partitions"],
                error=read["error"],
            )
            for i, read in enumerate(answer["reads"])
        ],
        classes=answer["classes"],
    )


def _drive(work: Path) -> None:
    """The driver: each read through ``spark.read.format(FORMAT)``, collected as Arrow."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    request = json.loads((work / "request.json").read_text())
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("fluss-snapshot-read")
        .config("spark.jars", ",".join(request["jars"]))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    answers: list[dict[str, Any]] = []
    try:
        for i, options in enumerate(request["reads"]):
            try:
                frame = spark.read.format(FORMAT).options(**options).load()
                partitions = frame.rdd.getNumPartitions()
                rows = frame.withColumn(PARTITION_COLUMN, F.spark_partition_id()).toArrow()
            except Exception as e:  # the read's error is the answer; the test asserts on it
                answers.append({"error": str(e), "partitions": None})
                continue
            with pa.ipc.new_file(work / f"read-{i}.arrow", rows.schema) as sink:
                sink.write_table(rows)
            answers.append({"error": None, "partitions": partitions})
        classes = {name: class_location(spark.sparkContext._jvm, name) for name in request["classes"]}
    finally:
        spark.stop()
    (work / "answer.json").write_text(json.dumps({"reads": answers, "classes": classes}))


if __name__ == "__main__":
    _drive(Path(sys.argv[1]))
