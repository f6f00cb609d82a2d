"""Split descriptors: the rows the Spark source emits, one per split of a round.

The source does not read table data: one stream cannot carry many tables' schemas, and a
table whose files fail must not fail the whole micro-batch. Its batches are these small rows,
one per split, derived from the batch's end offset alone. The round committer takes the same
splits from that offset in Spark's offsets log (:mod:`tiering.state.offset_log`) without running
a Spark job over the rows, and decodes the rows (:func:`from_descriptor`) only when that log is
of a format it does not know (:mod:`tiering.round.batch_splits`). A snapshot split has no
``start_offset``; its ``end_offset`` is the snapshot's ``log_offset``; a log split has no
``snapshot_id``. Nothing here imports pyspark: a row is a tuple, or a Spark ``Row`` (a tuple too).
"""

from __future__ import annotations

from collections.abc import Sequence

from tiering.enumerator.splits import LogSplit, SnapshotSplit, Split

DESCRIPTOR_SCHEMA = (
    "table string, table_id bigint, bucket int, kind string, snapshot_id bigint, "
    "start_offset bigint, end_offset bigint, round bigint"
)

_FIELDS = len(DESCRIPTOR_SCHEMA.split(","))


def to_descriptor(split: Split, round_id: int) -> tuple:
    if isinstance(split, SnapshotSplit):
        return (
            split.table,
            split.table_id,
            split.bucket,
            "snapshot",
            split.snapshot_id,
            None,
            split.log_offset,
            round_id,
        )
    return (split.table, split.table_id, split.bucket, "log", None, split.start_offset, split.end_offset, round_id)


def from_descriptor(row: Sequence) -> tuple[Split, int]:
    """The split and the round id of a descriptor row (fields in :data:`DESCRIPTOR_SCHEMA` order);
    the inverse of :func:`to_descriptor`. A row that names no split is a ``ValueError``."""
    if len(row) != _FIELDS:
        raise ValueError(f"descriptor row {tuple(row)!r}: expected {_FIELDS} fields, got {len(row)}")
    table, table_id, bucket, kind, snapshot_id, start_offset, end_offset, round_id = row
    if None not in (table, table_id, bucket, end_offset, round_id):
        if kind == "snapshot" and snapshot_id is not None and start_offset is None:
            return SnapshotSplit(table, bucket, table_id, snapshot_id, end_offset), round_id
        if kind == "log" and snapshot_id is None and start_offset is not None:
            return LogSplit(table, bucket, table_id, start_offset, end_offset), round_id
    raise ValueError(
        f"descriptor row {tuple(row)!r}: neither a snapshot split (a snapshot_id, no start_offset) "
        f"nor a log split (a start_offset, no snapshot_id)"
    )
