"""Applying a bucket's changelog to its base rows, as the store writes both (models.py: files).

The one pyarrow implementation, shared by the reference store (its snapshots and live state)
and the lake writers (a bucket's rewrite, on an executor or in the driver, and a MERGE's
source), so all of them agree on which change of a key wins. Failure modes: a key applied
twice or out of order (offsets are dense and unique within one bucket, so the change holding a
key's highest offset is its newest; across buckets offsets repeat, so callers pass one bucket
at a time); a resurrected row (a ``-D`` removes the key from the base and leaves no row; a
``-D`` of a key the base lacks does nothing).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from tiering.kvstore.protocol import DELETE, OFFSET_COLUMN, OP_COLUMN

__all__ = ["newest_per_key", "apply_changes"]

#: Compute arguments are Arrow scalars: a Python literal makes pyarrow try (and fail) to import
#: pandas and dateutil on every call, a cost per bucket per round.
_DELETE = pa.scalar(DELETE, pa.string())


def newest_per_key(changes: pa.Table, keys: Sequence[str]) -> pa.Table:
    """One bucket's changes reduced to the newest per key (deletes included), in log order."""
    if not changes.num_rows:
        return changes
    newest = changes.group_by(list(keys)).aggregate([(OFFSET_COLUMN, "max")])
    if newest.num_rows == changes.num_rows:
        return changes
    return changes.filter(pc.is_in(changes[OFFSET_COLUMN], value_set=newest[f"{OFFSET_COLUMN}_max"]))


def apply_changes(
    base: Iterable[pa.RecordBatch], newest: pa.Table | None, keys: Sequence[str], schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The bucket's rows after ``newest`` (:func:`newest_per_key`'s result, with ``__op``; None:
    no changes): the ``base`` rows (batches with ``schema``'s columns, streamed through) whose key
    it does not change, then its upserts, with ``schema``'s columns."""
    changed = newest.select(list(keys)) if newest is not None and newest.num_rows else None
    for batch in base:
        if changed is None:
            yield batch
        elif len(keys) == 1:  # a hash lookup, without planning an Acero join per batch
            yield batch.filter(pc.invert(pc.is_in(batch.column(keys[0]), value_set=changed.column(0))))
        else:
            kept = pa.Table.from_batches([batch]).join(changed, list(keys), join_type="left anti")
            yield from kept.select(schema.names).to_batches()
    if newest is not None:
        upserts = newest.filter(pc.not_equal(newest[OP_COLUMN], _DELETE)).select(schema.names)
        if not upserts.schema.equals(schema, check_metadata=False):
            upserts = upserts.cast(schema)
        yield from upserts.to_batches()
