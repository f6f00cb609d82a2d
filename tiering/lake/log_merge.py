"""A changelog-only round applied by a delta-rs MERGE in the driver, without a Spark job.

Why: most rounds of a running job carry a few changes per bucket, and rewriting whole buckets
with Spark costs seconds of job scheduling and copying for them. DESIGN §6 lets changelog
merges pass through the driver when bounded; the writer uses this path only for rounds without
a snapshot bucket and with at most ``lake.merge_max_changes`` changes, so driver memory is
bounded by that count.

Failure modes handled like the Spark path: a change applied twice or out of order (only
``[log_from, log_to)`` of each bucket is read and the latest ``__offset`` per key wins); a
resurrected row (a ``-D`` deletes the key and inserts nothing); a log file whose columns cannot
be read as the table's types (reading with the table's schema fails the round, nothing lands).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.dataset as ds
from deltalake import DeltaTable
from deltalake.transaction import CommitProperties

from tiering.kvstore.changelog import DELETE, newest_per_key
from tiering.kvstore.models import TableInfo
from tiering.lakestate.layout import BUCKET_COLUMN, OFFSET_COLUMN, OP_COLUMN, TIMESTAMP_COLUMN, lake_schema
from tiering.lake.round_plan import BucketPlan

__all__ = ["latest_changes", "merge_changes"]

_SOURCE, _TARGET = "s", "t"


def latest_changes(table: TableInfo, plans: Sequence[BucketPlan]) -> pa.Table:
    """The newest change per key of each planned bucket: the lake's columns plus ``__op``.

    ``plans``: at least one, each with changes (the writer merges nothing else)."""
    lake = lake_schema(table)
    log_schema = pa.schema([f for f in lake if f.name != BUCKET_COLUMN] + [pa.field(OP_COLUMN, pa.string())])
    offsets = ds.field(OFFSET_COLUMN)
    parts = []
    for plan in plans:
        changes = ds.dataset(list(plan.log_files), schema=log_schema, format="parquet").to_table(
            filter=(offsets >= plan.log_from) & (offsets < plan.log_to)
        )
        newest = newest_per_key(changes, table.primary_key)
        parts.append(newest.append_column(
            pa.field(BUCKET_COLUMN, pa.int32()), pa.array([plan.bucket] * newest.num_rows, pa.int32())
        ))
    return pa.concat_tables(parts)


def merge_changes(
    dt: DeltaTable, table: TableInfo, changes: pa.Table, properties: CommitProperties
) -> dict:
    """MERGE ``changes`` into the bucket-partitioned table in one commit; delta-rs's metrics.

    The predicate names ``__bucket`` so delta-rs prunes the other buckets' files from the
    source's bucket values (that needs the materialized, not the streamed, source).
    """
    keys = [BUCKET_COLUMN, *table.primary_key]
    written = [c.name for c in table.columns] + [OFFSET_COLUMN, TIMESTAMP_COLUMN]
    is_delete = f"{_SOURCE}.{_quote(OP_COLUMN)} = '{DELETE}'"
    is_upsert = f"{_SOURCE}.{_quote(OP_COLUMN)} <> '{DELETE}'"
    return (
        dt.merge(
            changes,
            predicate=" AND ".join(f"{_TARGET}.{_quote(k)} = {_SOURCE}.{_quote(k)}" for k in keys),
            source_alias=_SOURCE,
            target_alias=_TARGET,
            streamed_exec=False,
            commit_properties=properties,
        )
        .when_matched_delete(predicate=is_delete)
        .when_matched_update(updates={c: f"{_SOURCE}.{_quote(c)}" for c in written}, predicate=is_upsert)
        .when_not_matched_insert(updates={c: f"{_SOURCE}.{_quote(c)}" for c in [*written, BUCKET_COLUMN]}, predicate=is_upsert)
        .execute()
    )


def _quote(column: str) -> str:
    return f"`{column}`"
