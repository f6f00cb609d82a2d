"""The MERGE source of a round the change data feed must record (used by
:mod:`tiering.writers.change_feed` only): the bucket's rows as changes, streamed, for delta-rs to
merge into the lake. Only the changes are held; a snapshot streams through."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from tiering.delta_log.layout import BUCKET_COLUMN
from tiering.kvstore.contract import OP_COLUMN, UPDATE
from tiering.kvstore.contract.changes import apply_changes
from tiering.writers.bucket_plan import BucketBase
from tiering.writers.buckets.reads import BATCH_ROWS, base_batches, latest_changes
from tiering.writers.buckets.task import BucketTask, file_schema

__all__ = ["merge_batches", "base_rows"]

#: The change a snapshot row stands for in a MERGE's source: the key's row as it is now. (An
#: Arrow scalar: a Python literal makes pyarrow try to import pandas on every call.)
_UPSERT = pa.scalar(UPDATE, pa.string())


def merge_batches(task: BucketTask, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The bucket's rows for a MERGE into the lake, with ``schema``'s columns (the lake's and
    ``__op``): a snapshot bucket's whole content after the round (each row an upsert, so the
    MERGE can tell which rows differ from the lake's), otherwise its newest change per key,
    deletes included. A snapshot streams through; only the changes are held."""
    plan = task.plan
    changes = latest_changes(task) if plan.has_changes else None
    if plan.base is not BucketBase.SNAPSHOT:
        rows: Iterator[pa.RecordBatch] = iter(changes.to_batches(BATCH_ROWS) if changes is not None else ())
    else:
        columns = file_schema(task.table)  # the base's rows minus the changed keys, then the upserts
        rows = apply_changes(base_batches(task, columns), changes, task.table.primary_key, columns)
    bucket = pa.scalar(plan.bucket, schema.field(BUCKET_COLUMN).type)
    for batch in rows:
        if batch.num_rows:
            columns = {n: batch.column(n) for n in batch.schema.names}
            columns[BUCKET_COLUMN] = pa.repeat(bucket, batch.num_rows)
            columns.setdefault(OP_COLUMN, pa.repeat(_UPSERT, batch.num_rows))
            yield pa.RecordBatch.from_arrays([columns[n] for n in schema.names], schema=schema)


def base_rows(task: BucketTask) -> int:
    """Rows of the bucket's base files, from their Parquet footers (nothing is decoded)."""
    fs, paths = task.store.locate(task.plan.base_files)
    return sum(pq.read_metadata(fs.open_input_file(p)).num_rows for p in paths)
