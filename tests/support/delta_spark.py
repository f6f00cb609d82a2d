"""Delta's own JVM reader beside delta-rs: a second, independent reader of every lake table.

The lake is read by delta-rs everywhere in the service and the tests; a table only delta-rs can
read, or reads differently from Spark's Delta (an action Delta does not take, a partition value or
a timestamp it decodes otherwise), would pass them all. With the Delta jars on the test session's
classpath (``scripts/test_delta.sh`` names them in :data:`JARS_ENV`), the tests read each table
again with ``spark.read.format("delta")``: its rows, its schema, earlier versions (time travel)
and the change data feed; lakes on S3 too, through hadoop-aws's ``s3a`` (``deploy/jars/s3a``).
Without the jars nothing here reads anything (:func:`delta_reader` is None) and the suite runs as
it always did.

Failure mode guarded against: a second reader that silently reads nothing (a wrong path, no
session) would make every comparison pass; a table the reader cannot find fails instead.
"""

from __future__ import annotations

import datetime as dt
import os
from functools import cache
from typing import Any

from tiering.delta_log.lake import Lake

#: Comma-separated Delta jars (``deploy/jars/lib``, fetched by ``scripts/setup_delta.sh``) the
#: test's Spark sessions and the drivers they start put on Spark's classpath.
JARS_ENV = "DELTA_SPARK_JARS"

#: Delta's SQL extension and catalog: what Delta's docs set, needed for its SQL commands and for
#: tables in the session catalog (the path reads and writes here work without them). And the
#: partitions Delta rebuilds a table's state from its log with: 50 by default, a Spark stage of 50
#: tasks at every read of a version, which on two cores costs more than the tests' small logs.
_DELTA_SESSION = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.databricks.delta.snapshotPartitions": "2",
}


def delta_spark_conf() -> dict[str, str]:
    """The Spark conf that puts the Delta jars on a session's classpath ({} without them), with
    hadoop-aws's ``s3a`` beside them where its jars fit this pyspark, for reading lakes on S3."""
    from tests.support.s3a import s3a_jars

    jars = os.environ.get(JARS_ENV, "").strip()
    if not jars:
        return {}
    return {"spark.jars": ",".join([jars, *map(str, s3a_jars() or [])]), **_DELTA_SESSION}


def jars_configured() -> bool:
    """Whether this test run has the Delta jars (``scripts/test_delta.sh``)."""
    return bool(delta_spark_conf())


class DeltaReader:
    """Reads lake tables with the session's Delta data source: local lakes by path, lakes on S3
    through ``s3a`` with the settings the job gives Spark for a checkpoint there."""

    def __init__(self, spark) -> None:
        self.spark = spark

    def frame(self, lake: Lake, table: str, **options: Any):
        reader = self.spark.read.format("delta")
        for key, value in options.items():
            reader = reader.option(key, str(value))
        path = lake.path(table)
        return reader.load("s3a://" + path.removeprefix("s3://") if lake.store.is_s3 else path)

    def rows(
        self, lake: Lake, table: str, key: str = "id", *, drop: tuple[str, ...] = (), **options: Any
    ) -> dict[Any, dict]:
        """The table's rows by ``key`` (a duplicate fails), without the ``drop`` columns;
        ``options`` are the reader's (``versionAsOf``)."""
        out: dict[Any, dict] = {}
        for r in self.frame(lake, table, **options).collect():
            row = {k: _plain(v) for k, v in r.asDict().items() if k not in drop}
            assert row[key] not in out, f"Spark reads key {row[key]} of {table} twice"
            out[row[key]] = row
        return out

    def columns(self, lake: Lake, table: str) -> dict[str, str]:
        """The table's columns as Spark reads its schema: name -> Spark SQL type."""
        return {f.name: f.dataType.simpleString() for f in self.frame(lake, table).schema.fields}

    def feed(self, lake: Lake, table: str, start: int, end: int | None = None) -> list[dict]:
        """The change data feed of versions ``[start, end]`` (to the newest without ``end``)."""
        options: dict[str, Any] = {"readChangeFeed": "true", "startingVersion": start}
        if end is not None:
            options["endingVersion"] = end
        return [{k: _plain(v) for k, v in r.asDict().items()} for r in self.frame(lake, table, **options).collect()]


def delta_reader(lake: Lake) -> DeltaReader | None:
    """A Spark Delta reader for ``lake``, or None: no Delta jars in this run, no Spark session
    in this process, or a lake on S3 without hadoop-aws's jars for this pyspark. A session of a
    run with the jars that cannot load Delta fails: it would read nothing."""
    from pyspark.sql import SparkSession

    from tests.support.s3a import s3a_jars

    if not jars_configured() or (lake.store.is_s3 and s3a_jars() is None):
        return None
    spark = SparkSession.getActiveSession()
    if spark is None:
        return None
    missing = _missing_jars(spark)
    assert missing is None, f"{JARS_ENV} is set but the test's Spark session cannot read Delta: {missing}"
    if lake.store.is_s3:
        _reach(spark, lake)
    return DeltaReader(spark)


def _reach(spark, lake: Lake) -> None:
    """Point the session's ``s3a`` at ``lake``'s bucket: the job's own settings for a checkpoint
    on S3, and no cached filesystem (each test's S3 server has a port of its own, the bucket the
    same name)."""
    from tiering.state.checkpoint_store import S3Checkpoint

    settings = {**S3Checkpoint(lake.store).hadoop_conf(), "fs.s3a.impl.disable.cache": "true"}
    for key, value in settings.items():
        spark.conf.set(key, value)


@cache
def _missing_jars(spark) -> str | None:
    from tests.support.writers import missing_delta_jars

    return missing_delta_jars(spark)


def _plain(value: Any) -> Any:
    """A value as delta-rs gives it: Spark collects a timestamp as a naive local time."""
    if isinstance(value, dt.datetime) and value.tzinfo is None:
        return value.astimezone(dt.UTC)
    return value


def assert_versions_read_alike(reader: DeltaReader, lake: Lake, table: str, key: str = "id", last: int = 2) -> None:
    """The table's ``last`` newest versions read the same through Spark's time travel
    (``versionAsOf``) as through delta-rs's: rows and columns."""
    from deltalake import DeltaTable

    from tiering.delta_log.lake import table_rows

    newest = lake.load(table).dt.version()
    for version in range(max(0, newest - last + 1), newest + 1):
        dt = DeltaTable(lake.path(table), version=version, storage_options=lake.store.delta_options())
        theirs = {r[key]: r for r in table_rows(dt, lake.store, lake.path(table)).to_pylist()}
        ours = reader.rows(lake, table, key, versionAsOf=version)
        assert ours == theirs, f"{table} at version {version}: Spark reads {_diff(ours, theirs)} than delta-rs"


def _diff(ours: dict, theirs: dict) -> str:
    missing, extra = sorted(set(theirs) - set(ours)), sorted(set(ours) - set(theirs))
    wrong = [(k, ours[k], theirs[k]) for k in sorted(set(ours) & set(theirs)) if ours[k] != theirs[k]]
    return f"{len(missing)} fewer {missing[:5]}, {len(extra)} more {extra[:5]}, {len(wrong)} other rows {wrong[:3]}"
