"""Split descriptors: the rows the Spark source emits, one per split of a round.

The source does not read table data: one stream cannot carry many tables' schemas, and a
table whose files fail must not fail the whole micro-batch. It emits these small rows; the
round committer turns them back into splits, reads the files with Spark and writes Delta.
A snapshot split has no ``start_offset``; its ``end_offset`` is the snapshot's ``log_offset``.
"""

from __future__ import annotations

from collections.abc import Sequence

from tiering.enumerator.splits import LogSplit, SnapshotSplit, Split

DESCRIPTOR_SCHEMA = (
    "table string, table_id bigint, bucket int, kind string, snapshot_id bigint, "
    "start_offset bigint, end_offset bigint, round bigint"
)
DESCRIPTOR_COLUMNS = ("table", "table_id", "bucket", "kind", "snapshot_id", "start_offset", "end_offset", "round")


def to_descriptor(split: Split, round_id: int) -> tuple:
    if isinstance(split, SnapshotSplit):
        return (split.table, split.table_id, split.bucket, "snapshot", split.snapshot_id, None, split.log_offset, round_id)
    return (split.table, split.table_id, split.bucket, "log", None, split.start_offset, split.end_offset, round_id)


def from_descriptor(row: Sequence) -> tuple[Split, int]:
    """A descriptor row back to its split and the round it belongs to."""
    table, table_id, bucket, kind, snapshot_id, start, end, round_id = row
    if kind == "snapshot":
        return SnapshotSplit(table, bucket, table_id, snapshot_id, end), round_id
    return LogSplit(table, bucket, table_id, start, end), round_id
