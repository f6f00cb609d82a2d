"""A bucket decoded and written anew, with the round's changes applied: whole, or by file
(:mod:`~tiering.writers.buckets.key_ranges`), sorted by key and split into files of about the
round's target.

Rows already sorted by one integer key — a file this package wrote; checked, not assumed — get
their few changes spliced in (:func:`~tiering.kvstore.contract.changes.apply_sorted`): the rows between
two changed keys are kept as slices, so nothing is copied before the encoding, which is most of
a rewrite's time. Other rows (a byte-copied snapshot file, overlapping files, a composite or
non-integer key, changes in more places than the splice pays for) are filtered and sorted.

A base bigger than memory: rows are sorted in memory only when they and the changes take at
most :data:`SORT_MAX_BYTES` decoded; a bigger base streams through in record batches, unsorted
(split at the target all the same: its files' ranges overlap, which later rounds pay for, and
compaction sorts). Only the bucket's changes (newest per key) are held.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from operator import itemgetter

import pyarrow as pa

from tiering.kvstore.contract.changes import apply_changes, apply_sorted
from tiering.writers.buckets.encoding import SAMPLE_ROWS, Encoding
from tiering.writers.buckets.key_ranges import rewrite_groups
from tiering.writers.buckets.new_files import file_name, landing, written_file
from tiering.writers.buckets.reads import BATCH_ROWS, base_batches, latest_changes, read_batches
from tiering.writers.buckets.stats import FileStats
from tiering.writers.buckets.task import MIB, BucketTask, WrittenFile

__all__ = ["SORT_MAX_BYTES", "rewrite"]

#: A rewrite's rows are sorted in memory when they and its changes take at most this many bytes
#: decoded (a sort copies them once more, a splice does not); more stream through unsorted, as
#: they are read.
SORT_MAX_BYTES = 512 * MIB


def rewrite(task: BucketTask, schema: pa.Schema) -> tuple[list[WrittenFile], tuple[str, ...]]:
    """The bucket decoded and written anew: whole, or by file (:func:`rewrite_groups`)."""
    plan = task.plan
    changes = latest_changes(task) if plan.has_changes else None
    if not plan.by_file:
        return _write_rows(task, schema, base_batches(task, schema), changes, None)[0], ()
    written: list[WrittenFile] = []
    encoding = None  # the first group's, for all: one bucket's rows have one shape
    groups = rewrite_groups(plan.lake_files, changes, task.table.primary_key[0]) if changes is not None else []
    for group in groups:
        base = read_batches(task.store, [f.uri for f in group.files], schema, {f.uri: f.size for f in group.files})
        files, encoding = _write_rows(task, schema, base, group.changes, encoding)
        written += files
    return written, tuple(f.path for g in groups for f in g.files)


def _write_rows(
    task: BucketTask,
    schema: pa.Schema,
    base: Iterator[pa.RecordBatch],
    changes: pa.Table | None,
    encoding: Encoding | None,
) -> tuple[list[WrittenFile], Encoding | None]:
    """``base`` rows with ``changes`` applied, written as files of about the task's target:
    sorted by key (:func:`apply_sorted`: spliced into already sorted rows, else filtered and
    sorted) when the files' rows and the changes take at most :data:`SORT_MAX_BYTES` decoded,
    else streamed as they come; encoded with ``encoding``, or as :class:`Encoding` chooses from
    their first rows when it is None. Returns the files and the encoding used (``encoding`` when
    no row is left)."""
    keys = task.table.primary_key
    held: list[pa.RecordBatch] = []
    decoded = changes.nbytes if changes is not None else 0  # the changes are held either way
    while decoded <= SORT_MAX_BYTES and (batch := next(base, None)) is not None:
        held.append(batch)
        decoded += batch.nbytes
    if decoded > SORT_MAX_BYTES:
        head, batches = _head(apply_changes(itertools.chain(held, base), changes, keys, schema), SAMPLE_ROWS)
        sample = pa.Table.from_batches(head, schema)
        encoding = (encoding or Encoding.of(sample, task.compression)).measured(sample)
        per_file = encoding.rows_per_file(task.target_file_bytes)
    else:
        data = apply_sorted(pa.Table.from_batches(held, schema), changes, keys, schema)
        if not data.num_rows:
            return [], encoding
        encoding = encoding or Encoding.of(data, task.compression)
        pieces = 1
        # decoded, they could still fit one file: measure encoded (the bytes read and the changes,
        # an upper bound: spliced rows count their bytes slice by slice, which takes a while)
        if decoded > task.target_file_bytes:
            encoding = encoding.measured(data)
            pieces = max(
                1, round(data.num_rows / encoding.rows_per_file(task.target_file_bytes))
            )  # even: no small tail
        per_file = math.ceil(data.num_rows / pieces)
        batches = iter(data.to_batches(BATCH_ROWS))
    written = []
    for _, part in itertools.groupby(_split(batches, per_file), key=itemgetter(0)):
        written += _write_file(task, schema, encoding, (batch for _, batch in part))
    return written, encoding


def _head(batches: Iterator[pa.RecordBatch], rows: int) -> tuple[list[pa.RecordBatch], Iterator[pa.RecordBatch]]:
    """The first of ``batches`` holding ``rows`` rows or more (all of them, when they hold
    fewer), and an iterator of every batch, those first ones included."""
    head: list[pa.RecordBatch] = []
    held = 0
    for batch in batches:
        head.append(batch)
        held += batch.num_rows
        if held >= rows:
            break
    return head, itertools.chain(head, batches)


def _split(batches: Iterator[pa.RecordBatch], per_file: int) -> Iterator[tuple[int, pa.RecordBatch]]:
    """``batches`` sliced so that each file index gets ``per_file`` rows (the last one fewer)."""
    file, room = 0, per_file
    for batch in batches:
        while batch.num_rows:
            if not room:
                file, room = file + 1, per_file
            part = batch.slice(0, room)
            batch, room = batch.slice(part.num_rows), room - part.num_rows
            yield file, part


def _write_file(
    task: BucketTask, schema: pa.Schema, encoding: Encoding, batches: Iterator[pa.RecordBatch]
) -> list[WrittenFile]:
    """One new file of ``batches`` (none when they hold no row)."""
    plan = task.plan
    rel = file_name(plan)
    stats = FileStats(schema)
    groups = _row_groups(batches)
    first = next(groups, None)
    if first is None:
        return []
    landed = landing(task, rel)
    with landed as sink:
        with encoding.writer(sink, schema) as writer:
            for group in itertools.chain((first,), groups):
                writer.write_table(group)
                stats.add(group)
    return [written_file(task, rel, landed.size, stats)]


def _row_groups(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.Table]:
    """``batches`` gathered into row groups of about ``BATCH_ROWS`` rows: the kept base rows
    and the upserts come as separate batches, and each write would otherwise be a row group."""
    pending: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        if batch.num_rows:
            pending.append(batch)
            rows += batch.num_rows
        if rows >= BATCH_ROWS:
            yield pa.Table.from_batches(pending)
            pending, rows = [], 0
    if pending:
        yield pa.Table.from_batches(pending)
