"""The new rows of the buckets a round rewrites, as Spark DataFrames (copy-on-write per bucket).

Failure modes this guards against: a driver that runs out of memory on a big snapshot (every
row stays in Spark: files are read by executors, nothing is collected); a change applied out
of order or twice (the latest ``__offset`` per key wins, and only offsets the base lacks are
read); a resurrected row (a ``-D`` removes the key from the base and leaves no row).

Files are per bucket, so ``__bucket`` is a literal per file set rather than recomputed from
the key. Inputs are read with an explicit schema: no inference job, and a file whose column
type differs fails the round instead of being cast silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from tiering.delta_log.layout import BUCKET_COLUMN
from tiering.kvstore.contract import DELETE, OFFSET_COLUMN, OP_COLUMN, TIMESTAMP_COLUMN, UPDATE, StoreTable
from tiering.writers.bucket_plan import BucketBase, BucketPlan

__all__ = ["bucket_rows", "merge_rows", "output_columns"]


def output_columns(table: StoreTable) -> list[str]:
    """Column order of the rows written (``__bucket`` last: it becomes the directory)."""
    return [c.name for c in table.columns] + [OFFSET_COLUMN, TIMESTAMP_COLUMN, BUCKET_COLUMN]


def bucket_rows(spark: SparkSession, table: StoreTable, plans: Sequence[BucketPlan]) -> DataFrame | None:
    """The buckets' new rows; None when every planned bucket ends up empty without reading anything."""
    row_ddl = _ddl(table, with_op=False)
    bases = [_read(spark, p.base_files, row_ddl, p.bucket) for p in plans if p.base_files]
    base = _union(bases)
    columns = output_columns(table)
    latest = _latest_changes(spark, table, plans)
    if latest is None:
        return base.select(*columns) if base is not None else None
    keys = [BUCKET_COLUMN, *table.primary_key]
    upserts = latest.where(F.col(OP_COLUMN) != DELETE).select(*columns)
    if base is None:
        return upserts
    kept = base.join(latest.select(*keys), on=keys, how="left_anti")
    return kept.select(*columns).unionByName(upserts)


def merge_rows(spark: SparkSession, table: StoreTable, plans: Sequence[BucketPlan]) -> DataFrame | None:
    """The source of a MERGE of the buckets into the lake: :func:`output_columns` and ``__op``.
    A bucket the round bootstraps from a snapshot gives its whole new content, each row an
    upsert (the MERGE tells which differ from the lake's by ``__offset``); any other bucket its
    newest change per key, deletes included, and its lake files are never read (a MERGE reads
    the lake through Delta, deletion vectors applied). None: nothing to merge."""
    columns = [*output_columns(table), OP_COLUMN]
    rebuilt = bucket_rows(spark, table, [p for p in plans if p.base is BucketBase.SNAPSHOT])
    changes = _latest_changes(spark, table, [p for p in plans if p.base is not BucketBase.SNAPSHOT])
    parts = [] if rebuilt is None else [rebuilt.withColumn(OP_COLUMN, F.lit(UPDATE))]
    parts += [] if changes is None else [changes]
    return _union([p.select(*columns) for p in parts])


def _latest_changes(spark: SparkSession, table: StoreTable, plans: Sequence[BucketPlan]) -> DataFrame | None:
    """The buckets' newest change per key in ``[log_from, log_to)``, with ``__op``."""
    changes = _union(
        [
            _read(spark, p.log_files, _ddl(table, with_op=True), p.bucket).where(
                (F.col(OFFSET_COLUMN) >= p.log_from) & (F.col(OFFSET_COLUMN) < p.log_to)
            )
            for p in plans
            if p.has_changes
        ]
    )
    if changes is None:
        return None
    newest_first = Window.partitionBy(BUCKET_COLUMN, *table.primary_key).orderBy(F.col(OFFSET_COLUMN).desc())
    return changes.withColumn("__rank", F.row_number().over(newest_first)).where("__rank = 1").drop("__rank")


def _read(spark: SparkSession, files: Sequence[str], ddl: str, bucket: int) -> DataFrame:
    return spark.read.schema(ddl).parquet(*files).withColumn(BUCKET_COLUMN, F.lit(bucket).cast("int"))


def _ddl(table: StoreTable, *, with_op: bool) -> str:
    """The Parquet schema of the store's files (and of the lake's files, which lack ``__op``)."""
    columns = [f"`{c.name}` {c.spark_type}" for c in table.columns]
    columns.append(f"`{OFFSET_COLUMN}` bigint")
    if with_op:
        columns.append(f"`{OP_COLUMN}` string")
    columns.append(f"`{TIMESTAMP_COLUMN}` timestamp")
    return ", ".join(columns)


def _union(frames: list[DataFrame]) -> DataFrame | None:
    return reduce(DataFrame.unionByName, frames) if frames else None
