"""Applying a bucket's changes (the seam's columns, :mod:`~tiering.kvstore.contract.columns`) to its base rows.

The one pyarrow implementation, shared by the reference store (its snapshots and live state)
and the lake writers (a bucket's rewrite, on an executor or in the driver, and a MERGE's
source), so all of them agree on which change of a key wins. Failure modes: a key applied
twice or out of order (offsets are increasing and unique within one bucket, so the change
holding a key's highest offset is its newest; across buckets offsets repeat, so callers pass one bucket
at a time); a resurrected row (a ``-D`` removes the key from the base and leaves no row; a
``-D`` of a key the base lacks does nothing).

Two ways to apply: :func:`apply_changes` streams (the base's rows without the changed keys, then
the upserts: unsorted), :func:`apply_sorted` returns the rows sorted by key. The latter splices
when the base is already sorted by one integer key (the lake's files are): the few changes are
placed by binary search and the base's rows between them kept as zero-copy slices, where a
filter and a sort would copy every column twice before the rows are encoded.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc

from tiering.kvstore.contract.columns import DELETE, OFFSET_COLUMN, OP_COLUMN

__all__ = ["newest_per_key", "apply_changes", "apply_sorted", "splice_changes", "SPLICE_ROWS_PER_CUT"]

#: Compute arguments are Arrow scalars: a Python literal makes pyarrow try (and fail) to import
#: pandas and dateutil on every call, a cost per bucket per round.
_DELETE = pa.scalar(DELETE, pa.string())
#: The base rows :func:`splice_changes` needs per place it cuts them at, or it declines. Each cut
#: costs a chunk of every column (sliced, concatenated, encoded on its own) where a sort costs
#: per row: one 150,000-row file of the amplification benchmark's rows rewritten (read, changed,
#: encoded), CPU ms, medians of 20 interleaved, sort against splice: 61.9 / 51.4 at 10 changed
#: keys, 76.9 / 72.7 at 100, 91.6 / 97.0 at 300, 80.5 / 142.9 at 1,000.
SPLICE_ROWS_PER_CUT = 1000
#: The memoryview format of each integer type, by (bytes, signed): a key column's values read
#: as a Python sequence without a copy, so :mod:`bisect` searches it in C (pyarrow's own
#: ``search_sorted`` is from 2026: pyarrow 26 has it, the 18 the project supports does not).
_FORMATS: dict[tuple[int, bool], Literal["b", "h", "i", "q", "B", "H", "I", "Q"]] = {
    (1, True): "b",
    (2, True): "h",
    (4, True): "i",
    (8, True): "q",
    (1, False): "B",
    (2, False): "H",
    (4, False): "I",
    (8, False): "Q",
}


def newest_per_key(changes: pa.Table, keys: Sequence[str]) -> pa.Table:
    """One bucket's changes reduced to the newest per key (deletes included), in log order.
    Grouped on the calling thread: its callers already run a bucket per thread, and handing one
    bucket's group-by to Arrow's pool costs more CPU than it saves."""
    if not changes.num_rows:
        return changes
    newest = changes.group_by(list(keys), use_threads=False).aggregate([(OFFSET_COLUMN, "max")])
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
        yield from _upserts(newest, schema).to_batches()


def apply_sorted(base: pa.Table, newest: pa.Table | None, keys: Sequence[str], schema: pa.Schema) -> pa.Table:
    """The rows :func:`apply_changes` gives (``base`` with ``schema``'s columns), sorted by
    ``keys``: spliced (:func:`splice_changes`) when ``base`` allows it and the changes are few
    (:func:`_few`), else filtered and sorted."""
    spliced = splice_changes(base, newest, keys, schema) if _few(newest, base) else None
    if spliced is not None:
        return spliced
    rows = pa.Table.from_batches(apply_changes(base.to_batches(), newest, keys, schema), schema)
    return rows.sort_by([(k, "ascending") for k in keys])


def splice_changes(
    base: pa.Table,
    newest: pa.Table | None,
    keys: Sequence[str],
    schema: pa.Schema,
    rows_per_cut: int = SPLICE_ROWS_PER_CUT,
) -> pa.Table | None:
    """``base`` after ``newest`` as :func:`apply_sorted` has it, built of zero-copy slices of
    ``base`` between the changed keys with the upserts in their keys' places; None unless
    ``base`` is sorted by ``keys``, one integer column without nulls (checked here, in one
    vectorised pass: a byte-copied snapshot file need not be sorted), ``newest``'s keys are
    integers and its keys and ``__op`` have no nulls, and it cuts ``base`` in at most one place
    per ``rows_per_cut`` rows.

    The same rows in the same order as the filter and the stable sort: a changed key's base rows
    (all of them, were it repeated) are skipped and its upsert, if any, takes their place.
    """
    if len(keys) != 1 or not _integers(base.column(keys[0])):
        return None
    key = keys[0]
    column = base.column(key).combine_chunks()
    if len(column) > 1 and pc.any(pc.less(column.slice(1), column.slice(0, len(column) - 1))).as_py():
        return None  # each key compared with the next at once: one is smaller
    if newest is None or not newest.num_rows:
        return base
    if not _integers(newest.column(key)) or newest.column(OP_COLUMN).null_count:
        return None  # a change without its kind (the protocol has none): the sort path's handling
    newest = newest.sort_by(key)
    upserts = _upserts(newest, schema)
    placed = seen = kept = 0  # upserts placed and seen, base rows consumed, so far
    pieces: list[pa.Table] = []
    cuts = base.num_rows // rows_per_cut  # left to make
    values = _sequence(column)
    for changed, upsert in zip(
        newest.column(key).to_pylist(), pc.not_equal(newest[OP_COLUMN], _DELETE).to_pylist(), strict=False
    ):
        start = bisect.bisect_left(values, changed, kept)  # the changed keys ascend: search from the last
        if start > kept:  # base rows before this key: the upserts so far, then them
            if not cuts:
                return None
            cuts -= 1
            pieces += [upserts.slice(placed, seen - placed), base.slice(kept, start - kept)]
            placed = seen
        kept = bisect.bisect_right(values, changed, start)
        seen += upsert
    pieces = [p for p in (*pieces, upserts.slice(placed, seen - placed), base.slice(kept)) if p.num_rows]
    return pa.concat_tables(pieces) if pieces else base.slice(0, 0)


def _few(newest: pa.Table | None, base: pa.Table) -> bool:
    """Whether ``newest`` holds at most one change per :data:`SPLICE_ROWS_PER_CUT` rows of ``base``.
    The splice places each changed key in Python (two binary searches), the sort handles rows in
    Arrow: changes to most of the keys make few cuts, so :func:`splice_changes` would not decline
    them, and would place them one by one, holding the GIL, for far longer than the sort takes."""
    return newest is None or newest.num_rows * SPLICE_ROWS_PER_CUT <= base.num_rows


def _upserts(newest: pa.Table, schema: pa.Schema) -> pa.Table:
    """``newest``'s upserts (its deletes dropped) with ``schema``'s columns."""
    upserts = newest.filter(pc.not_equal(newest[OP_COLUMN], _DELETE)).select(schema.names)
    return upserts if upserts.schema.equals(schema, check_metadata=False) else upserts.cast(schema)


def _integers(column: pa.ChunkedArray) -> bool:
    return pa.types.is_integer(column.type) and not column.null_count


def _sequence(column: pa.Array) -> Sequence[int]:
    """An integer column without nulls as a read-only sequence of its values, without a copy."""
    if not len(column):
        return ()
    width = column.type.bit_width // 8
    data = memoryview(column.buffers()[1])[column.offset * width : (column.offset + len(column)) * width]
    return data.cast(_FORMATS[(width, pa.types.is_signed_integer(column.type))])
