"""Split descriptors: the rows the Spark source emits, one per split of a round.

The source does not read table data: one stream cannot carry many tables' schemas, and a
table whose files fail must not fail the whole micro-batch. Its batches are these small rows,
one per split, derived from the batch's end offset alone; the round committer takes the same
splits from that offset in the checkpoint (:mod:`tiering.state.offset_log`) without running a
Spark job over the rows. A snapshot split has no ``start_offset``; its ``end_offset`` is the
snapshot's ``log_offset``.
"""

from __future__ import annotations

from tiering.enumerator.splits import LogSplit, SnapshotSplit, Split

DESCRIPTOR_SCHEMA = (
    "table string, table_id bigint, bucket int, kind string, snapshot_id bigint, "
    "start_offset bigint, end_offset bigint, round bigint"
)


def to_descriptor(split: Split, round_id: int) -> tuple:
    if isinstance(split, SnapshotSplit):
        return (split.table, split.table_id, split.bucket, "snapshot", split.snapshot_id, None, split.log_offset, round_id)
    return (split.table, split.table_id, split.bucket, "log", None, split.start_offset, split.end_offset, round_id)
