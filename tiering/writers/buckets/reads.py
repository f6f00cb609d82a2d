"""Reading a bucket task's inputs: base rows, and the bucket's newest changes, from Parquet files
or through the store's reader (:attr:`~tiering.writers.bucket_plan.BucketPlan.reader`).

An input column whose type differs from the table's fails the read (:class:`TypeError`), the
task, and the table's round with it; nothing is committed. A change applied twice or out of
order cannot happen: only ``[log_from, log_to)`` is read, and the newest ``__offset`` per key
wins. A snapshot read through a reader has the user columns only: each row gets the snapshot's
last offset (``log_from - 1``: every change read on top of it is newer) and no store time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from tiering.kvstore.contract import OFFSET_COLUMN, OP_COLUMN, TIMESTAMP_COLUMN, SnapshotRef
from tiering.kvstore.contract.changes import newest_per_key
from tiering.objectstore.object_store import ObjectStore
from tiering.writers.buckets.task import BucketTask, file_schema

__all__ = ["BATCH_ROWS", "read_batches", "base_batches", "latest_changes"]

#: Rows of a record batch read, and of a row group written (:mod:`~tiering.writers.buckets.rewrite`).
BATCH_ROWS = 256 * 1024
#: Reads a lake file of known size on S3 without a HEAD first (:func:`read_batches`).
_PARQUET = pads.ParquetFileFormat()


def latest_changes(task: BucketTask) -> pa.Table:
    """The newest change per key in ``[log_from, log_to)`` of the bucket's log files."""
    plan = task.plan
    schema = file_schema(task.table).append(pa.field(OP_COLUMN, pa.string()))
    if plan.reader is not None:
        read = plan.reader.changelog(task.table, plan.bucket, plan.log_from, plan.log_to)
        changes = pa.Table.from_batches([_aligned(b.select(schema.names), schema) for b in read], schema)
        return newest_per_key(changes, task.table.primary_key)
    changes = pa.Table.from_batches(list(read_batches(task.store, plan.log_files, schema)), schema)
    offsets = changes[OFFSET_COLUMN]
    read = pc.min_max(offsets)
    if read["min"].as_py() is not None and (read["min"].as_py() < plan.log_from or read["max"].as_py() >= plan.log_to):
        # the segments reach past the round's range: keep [log_from, log_to) only
        low, high = pa.scalar(plan.log_from, pa.int64()), pa.scalar(plan.log_to, pa.int64())
        changes = changes.filter(pc.and_(pc.greater_equal(offsets, low), pc.less(offsets, high)))
    return newest_per_key(changes, task.table.primary_key)


def base_batches(task: BucketTask, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The bucket's base rows with ``schema``'s columns: its base files' (a snapshot's or the
    lake's), or, with a reader, the snapshot's rows it reads."""
    plan = task.plan
    if plan.reader is None or plan.snapshot_id is None:
        yield from read_batches(task.store, plan.base_files, schema, {f.uri: f.size for f in plan.lake_files})
        return
    ref = SnapshotRef(task.table.table_id, plan.bucket, plan.snapshot_id, plan.log_from)
    offset = pa.scalar(plan.log_from - 1, schema.field(OFFSET_COLUMN).type)
    for batch in plan.reader.snapshot_rows(task.table, ref):
        columns = {n: batch.column(n) for n in batch.schema.names}
        columns[OFFSET_COLUMN] = pa.repeat(offset, batch.num_rows)
        columns[TIMESTAMP_COLUMN] = pa.nulls(batch.num_rows, schema.field(TIMESTAMP_COLUMN).type)
        yield _aligned(pa.RecordBatch.from_pydict(columns), schema)


def read_batches(
    store: ObjectStore, files: Sequence[str], schema: pa.Schema, sizes: Mapping[str, int] | None = None
) -> Iterator[pa.RecordBatch]:
    """The files' rows with ``schema``'s columns, in batches; a column a file lacks (written
    before the column was added) reads as nulls, a column of another type fails. Files are
    opened directly: a dataset would first list and stat them, a cost per bucket per round.
    Decoded on the calling thread (``use_threads=False``): the parallelism is the round's, a
    task per core or the driver's table threads, and handing a file of a few rows to Arrow's
    thread pool cost more than decoding it (0.50 against 0.30 ms of CPU per file).

    On S3, a file whose size ``sizes`` knows (a lake file: the Delta log says it) is read as a
    fragment of that size: opening it by path costs a HEAD for its size first, one round trip
    of three (tens of ms), against 0.45 ms more CPU per file for the fragment; a local
    filesystem answers at once, and keeps the cheaper reader."""
    if not files:
        return
    fs, paths = store.locate(files)
    known = sizes if store.is_s3 and sizes else {}
    for uri, path in zip(files, paths, strict=False):
        if uri in known:
            fragment = _PARQUET.make_fragment(path, filesystem=fs, file_size=known[uri])
            yield from (_aligned(b, schema) for b in fragment.to_batches(batch_size=BATCH_ROWS, use_threads=False))
            continue
        with fs.open_input_file(path) as handle:
            parquet = pq.ParquetFile(handle)
            present = set(parquet.schema_arrow.names)
            columns = [name for name in schema.names if name in present]
            for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=columns, use_threads=False):
                yield _aligned(batch, schema)


def _aligned(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if batch.schema.equals(schema, check_metadata=False):
        return batch
    columns = []
    for f in schema:
        if f.name not in batch.schema.names:
            columns.append(pa.nulls(batch.num_rows, f.type))
            continue
        column = batch.column(f.name)
        if column.type != f.type:
            raise TypeError(f"column {f.name!r} is {column.type} in the file, {f.type} in the table")
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=schema)
