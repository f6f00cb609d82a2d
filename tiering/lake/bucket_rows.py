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
from tiering.kvstore.models import TableInfo
from tiering.kvstore.protocol import DELETE, OFFSET_COLUMN, OP_COLUMN, TIMESTAMP_COLUMN
from tiering.lake.bucket_plan import BucketPlan

__all__ = ["bucket_rows", "output_columns"]


def output_columns(table: TableInfo) -> list[str]:
    """Column order of the rows written (``__bucket`` last: it becomes the directory)."""
    return [c.name for c in table.columns] + [OFFSET_COLUMN, TIMESTAMP_COLUMN, BUCKET_COLUMN]


def bucket_rows(spark: SparkSession, table: TableInfo, plans: Sequence[BucketPlan]) -> DataFrame | None:
    """The buckets' new rows; None when every planned bucket ends up empty without reading anything."""
    row_ddl = _ddl(table, with_op=False)
    bases = [_read(spark, p.base_files, row_ddl, p.bucket) for p in plans if p.base_files]
    changes_parts = [
        _read(spark, p.log_files, _ddl(table, with_op=True), p.bucket).where(
            (F.col(OFFSET_COLUMN) >= p.log_from) & (F.col(OFFSET_COLUMN) < p.log_to)
        )
        for p in plans
        if p.has_changes
    ]
    base = _union(bases)
    changes = _union(changes_parts)
    columns = output_columns(table)
    if changes is None:
        return base.select(*columns) if base is not None else None
    keys = [BUCKET_COLUMN, *table.primary_key]
    newest_first = Window.partitionBy(*keys).orderBy(F.col(OFFSET_COLUMN).desc())
    latest = changes.withColumn("__rank", F.row_number().over(newest_first)).where("__rank = 1").drop("__rank")
    upserts = latest.where(F.col(OP_COLUMN) != DELETE).select(*columns)
    if base is None:
        return upserts
    kept = base.join(latest.select(*keys), on=keys, how="left_anti")
    return kept.select(*columns).unionByName(upserts)


def _read(spark: SparkSession, files: Sequence[str], ddl: str, bucket: int) -> DataFrame:
    return spark.read.schema(ddl).parquet(*files).withColumn(BUCKET_COLUMN, F.lit(bucket).cast("int"))


def _ddl(table: TableInfo, *, with_op: bool) -> str:
    """The Parquet schema of the store's files (and of the lake's files, which lack ``__op``)."""
    columns = [f"`{c.name}` {c.type}" for c in table.columns]
    columns.append(f"`{OFFSET_COLUMN}` bigint")
    if with_op:
        columns.append(f"`{OP_COLUMN}` string")
    columns.append(f"`{TIMESTAMP_COLUMN}` timestamp")
    return ", ".join(columns)


def _union(frames: list[DataFrame]) -> DataFrame | None:
    return reduce(DataFrame.unionByName, frames) if frames else None
