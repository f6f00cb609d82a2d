"""One bucket's new data files, written where the lake is, from inside a Spark task (executor side).

A round rewrites each bucket it touches (copy-on-write per bucket): the bucket's base rows — a
snapshot's files, or its current lake files — minus the keys the round changed, plus the newest
upsert of each changed key. This module does that for one bucket with pyarrow, writes the result
straight into ``<table>/__bucket=<b>/`` through the object store (local disk or S3), and returns
the file descriptions the driver needs for its one Delta commit. No staging, no rename: the
driver and the executors need not share a filesystem.

A bootstrap bucket whose snapshot files already have the lake's columns, with no change on top,
is not decoded at all: its files are copied byte for byte (the store writes immutable Parquet
with exactly the lake file's columns), and their statistics come from the Parquet footers.

Failure modes and what happens:
- a snapshot bigger than memory: base rows stream through in record batches; only the bucket's
  changes (newest per key, bounded by the round's offsets) are held at once;
- a change applied twice or out of order: only ``[log_from, log_to)`` is read, and the newest
  ``__offset`` per key wins; a resurrected row: a ``-D`` removes the key and inserts nothing;
- a file a reader must not see yet: files get fresh names and Delta readers only see files a
  commit adds, so a task that dies (or a commit that loses a race) leaves unreferenced files,
  which the driver deletes when it knows, and a full VACUUM removes otherwise;
- an input column whose type differs from the table's: reading with the table's schema fails
  the task, and the table's round with it; nothing is committed;
- a file that did not land (the store refused a part, timed out, lost it): each file is closed
  explicitly and found by one HEAD with every byte written (:mod:`tiering.storage.landed`), else
  an :class:`~tiering.errors.ObjectWriteError` names the object, the request and the store's
  answer and fails the bucket, so no commit references a file that is not there.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake.transaction import AddAction

from tiering.kvstore.changelog import apply_changes, newest_per_key
from tiering.kvstore.models import TableInfo
from tiering.kvstore.protocol import OFFSET_COLUMN, OP_COLUMN, UPDATE
from tiering.lake.round_plan import BucketPlan
from tiering.lakestate.layout import BUCKET_COLUMN, lake_schema
from tiering.storage.landed import LandedObject, copy_object
from tiering.storage.object_store import ObjectStore

__all__ = [
    "BucketTask", "BucketResult", "WrittenFile", "write_bucket", "run_task", "file_schema", "merge_batches", "base_rows",
]

_BATCH_ROWS = 256 * 1024
#: The change a snapshot row stands for in a MERGE's source: the key's row as it is now. (An
#: Arrow scalar: a Python literal makes pyarrow try to import pandas on every call.)
_UPSERT = pa.scalar(UPDATE, pa.string())


@dataclass(frozen=True)
class BucketTask:
    """Everything a task needs to rewrite one bucket (picklable: it travels to an executor)."""

    table: TableInfo
    table_uri: str
    plan: BucketPlan
    store: ObjectStore


@dataclass(frozen=True)
class WrittenFile:
    """A data file a task wrote, relative to the table root, with its Delta statistics."""

    path: str
    bucket: int
    size: int
    num_records: int
    stats: str
    modification_time: int

    def add_action(self) -> AddAction:
        return AddAction(
            path=self.path,
            size=self.size,
            partition_values={BUCKET_COLUMN: str(self.bucket)},
            modification_time=self.modification_time,
            data_change=True,
            stats=self.stats,
        )


@dataclass(frozen=True)
class BucketResult:
    """What a task returns: its files, or why it failed (a message naming the table and bucket).
    A failure is a value, not a raised error, so one bucket's failure fails its table only."""

    table: str
    bucket: int
    files: tuple[WrittenFile, ...] = ()
    error: str | None = None


def run_task(task: BucketTask) -> BucketResult:
    """:func:`write_bucket` as a Spark task: every error comes back as a result."""
    try:
        return BucketResult(task.table.name, task.plan.bucket, tuple(write_bucket(task)))
    except Exception as e:  # noqa: BLE001 - reported to the driver, which fails the table
        return BucketResult(task.table.name, task.plan.bucket, error=f"bucket {task.plan.bucket}: {type(e).__name__}: {e}")


def file_schema(table: TableInfo) -> pa.Schema:
    """The columns of a lake data file: the lake's, without the ``__bucket`` partition column."""
    lake = lake_schema(table)
    return lake.remove(lake.get_field_index(BUCKET_COLUMN))


def write_bucket(task: BucketTask) -> list[WrittenFile]:
    """Write ``task``'s bucket as it is after the round; no file when it ends up empty."""
    schema = file_schema(task.table)
    if _copyable(task, schema):
        return [_copy(task, path, schema) for path in task.plan.base_files]
    return _rewrite(task, schema)


def _rewrite(task: BucketTask, schema: pa.Schema) -> list[WrittenFile]:
    plan = task.plan
    changes = _latest_changes(task) if plan.has_changes else None
    rel = _file_name(plan)
    stats = _Stats(schema)
    groups = _row_groups(_rows(task, schema, changes))
    first = next(groups, None)
    if first is None:
        return []
    landed = _landing(task, rel)
    with landed as sink:
        with pq.ParquetWriter(sink, schema, compression="zstd") as writer:
            for group in itertools.chain((first,), groups):
                writer.write_table(group)
                stats.add(group)
    return [WrittenFile(rel, plan.bucket, landed.size, stats.rows, stats.to_json(), int(time.time() * 1000))]


def _row_groups(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.Table]:
    """``batches`` gathered into row groups of about ``_BATCH_ROWS`` rows: the kept base rows
    and the upserts come as separate batches, and each write would otherwise be a row group."""
    pending: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        if batch.num_rows:
            pending.append(batch)
            rows += batch.num_rows
        if rows >= _BATCH_ROWS:
            yield pa.Table.from_batches(pending)
            pending, rows = [], 0
    if pending:
        yield pa.Table.from_batches(pending)


def merge_batches(task: BucketTask, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The bucket's rows for a MERGE into the lake, with ``schema``'s columns (the lake's and
    ``__op``): a snapshot bucket's whole content after the round (each row an upsert, so the
    MERGE can tell which rows differ from the lake's), otherwise its newest change per key,
    deletes included. A snapshot streams through; only the changes are held."""
    plan = task.plan
    changes = _latest_changes(task) if plan.has_changes else None
    if plan.base != "snapshot":
        rows: Iterator[pa.RecordBatch] = iter(changes.to_batches(_BATCH_ROWS) if changes is not None else ())
    else:
        rows = _rows(task, file_schema(task.table), changes)
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


def _file_name(plan: BucketPlan) -> str:
    return f"{BUCKET_COLUMN}={plan.bucket}/part-{uuid.uuid4().hex}-r{plan.log_to}.parquet"


def _copyable(task: BucketTask, schema: pa.Schema) -> bool:
    """A snapshot bucket with nothing on top, whose files have exactly the lake file's columns."""
    plan = task.plan
    if plan.base != "snapshot" or plan.has_changes or not plan.base_files:
        return False
    fs, paths = task.store.locate(plan.base_files)
    return all(pq.read_schema(fs.open_input_file(p)).equals(schema, check_metadata=False) for p in paths)


def _copy(task: BucketTask, source: str, schema: pa.Schema) -> WrittenFile:
    """One snapshot file copied into the bucket as it is; statistics from its footer."""
    fs, (path,) = task.store.locate([source])
    rel = _file_name(task.plan)
    with fs.open_input_file(path) as reader:
        meta = pq.read_metadata(reader)
        reader.seek(0)
        size = copy_object(reader, _landing(task, rel))
    stats = _Stats(schema)
    stats.add_footer(meta)
    return WrittenFile(rel, task.plan.bucket, size, stats.rows, stats.to_json(), int(time.time() * 1000))


def _landing(task: BucketTask, rel: str) -> LandedObject:
    """The new file ``rel`` of the task's table, checked to have landed when written (S3 has no
    directories to create: a local one is made first)."""
    store = task.store
    uri = f"{task.table_uri}/{rel}"
    target = store.path(uri)
    if not store.is_s3:
        store.filesystem.create_dir(target.rsplit("/", 1)[0], recursive=True)
    return LandedObject(store.filesystem, target, uri)


def _rows(task: BucketTask, schema: pa.Schema, changes: pa.Table | None) -> Iterator[pa.RecordBatch]:
    """The base's rows minus the changed keys, then the upserts (the file's columns)."""
    return apply_changes(_batches(task.store, task.plan.base_files, schema), changes, task.table.primary_key, schema)


def _latest_changes(task: BucketTask) -> pa.Table:
    """The newest change per key in ``[log_from, log_to)`` of the bucket's log files."""
    plan = task.plan
    schema = file_schema(task.table).append(pa.field(OP_COLUMN, pa.string()))
    changes = pa.Table.from_batches(list(_batches(task.store, plan.log_files, schema)), schema)
    offsets = changes[OFFSET_COLUMN]
    read = pc.min_max(offsets)
    if read["min"].as_py() is not None and (read["min"].as_py() < plan.log_from or read["max"].as_py() >= plan.log_to):
        # the segments reach past the round's range: keep [log_from, log_to) only
        low, high = pa.scalar(plan.log_from, pa.int64()), pa.scalar(plan.log_to, pa.int64())
        changes = changes.filter(pc.and_(pc.greater_equal(offsets, low), pc.less(offsets, high)))
    return newest_per_key(changes, task.table.primary_key)


def _batches(store: ObjectStore, files: Sequence[str], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The files' rows with ``schema``'s columns, in batches; a column a file lacks (written
    before the column was added) reads as nulls, a column of another type fails. Files are
    opened directly: a dataset would first list and stat them, a cost per bucket per round."""
    if not files:
        return
    fs, paths = store.locate(files)
    for path in paths:
        with fs.open_input_file(path) as handle:
            for batch in pq.ParquetFile(handle).iter_batches(batch_size=_BATCH_ROWS):
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


class _Stats:
    """Delta file statistics: ``numRecords``, and min/max/nullCount of integer columns (exact,
    and enough to skip files on ``__offset`` and integer keys; other types are left out rather
    than risk a truncated string bound that would make readers skip matching files)."""

    def __init__(self, schema: pa.Schema) -> None:
        self.rows = 0
        self._columns = [f.name for f in schema if pa.types.is_integer(f.type)]
        self._min: dict[str, int] = {}
        self._max: dict[str, int] = {}
        self._nulls = dict.fromkeys(self._columns, 0)
        self._unknown: set[str] = set()

    def add(self, batch: pa.RecordBatch | pa.Table) -> None:
        self.rows += batch.num_rows
        for name in self._columns:
            column = batch.column(name)
            self._nulls[name] += column.null_count
            bounds = pc.min_max(column)
            low, high = bounds["min"].as_py(), bounds["max"].as_py()
            if low is not None:
                self._bound(name, low, high)

    def add_footer(self, meta: pq.FileMetaData) -> None:
        """A whole file's figures from its row groups' statistics (exact for integers); a
        column without them gets no bounds at all, never a guessed one."""
        self.rows += meta.num_rows
        names = [meta.schema.column(i).name for i in range(meta.num_columns)]
        for name in self._columns:
            index = names.index(name)
            groups = [meta.row_group(g).column(index).statistics for g in range(meta.num_row_groups)]
            if any(s is None or not s.has_null_count for s in groups):
                self._unknown.add(name)
                continue
            self._nulls[name] += sum(s.null_count for s in groups)
            for s in groups:
                if s.has_min_max:
                    self._bound(name, s.min, s.max)
                elif s.num_values:
                    self._unknown.add(name)

    def _bound(self, name: str, low: int, high: int) -> None:
        self._min[name] = low if name not in self._min else min(self._min[name], low)
        self._max[name] = high if name not in self._max else max(self._max[name], high)

    def to_json(self) -> str:
        stats: dict = {"numRecords": self.rows}
        known = [c for c in self._columns if c not in self._unknown]
        if known:
            stats.update(
                minValues={c: self._min[c] for c in known if c in self._min},
                maxValues={c: self._max[c] for c in known if c in self._max},
                nullCount={c: self._nulls[c] for c in known},
            )
        return json.dumps(stats)
