"""One bucket's new data files, written where the lake is, from inside a Spark task (executor side).

A round rewrites what it touches copy-on-write: base rows — a snapshot's files, or lake files —
minus the keys the round changed, plus the newest upsert of each changed key. This module does
that for one bucket with pyarrow, writes the result straight into ``<table>/__bucket=<b>/``
through the object store (local disk or S3), and returns the file descriptions the driver needs
for its one Delta commit. No staging, no rename: the driver and the executors need not share a
filesystem.

Write amplification (a round's cost growing with the table, not with its changes) is what the
layout is for: a bucket is kept as key-sorted files of about the round's file target, each with
its first key column's min/max in its statistics. A bucket already in the lake is rewritten by
file (:func:`rewrite_groups`): a changed key is removed from every file whose range covers it
(ranges may overlap: a byte-copied snapshot file is not sorted; that is only slower), a new key
no range covers goes into exactly one file's rewrite (the nearest file's), and only those files
are read, changed, split into files of about the target and replaced. Everything else (a
bootstrap that decodes its rows, a whole-bucket rewrite) is written the same way: sorted, split
at the target. Rows already sorted by one integer key — a file this module wrote; checked, not
assumed — get their few changes spliced in (:func:`~tiering.kvstore.changelog.apply_sorted`): the
rows between two changed keys are kept as slices, so nothing is copied before the encoding,
which is most of a rewrite's time. Other rows (a byte-copied snapshot file, overlapping files, a
composite or non-integer key, changes in more places than the splice pays for) are filtered and
sorted.

A bootstrap bucket whose snapshot files already have the lake's columns, with no change on top,
is not decoded at all: its files are copied byte for byte (the store writes immutable Parquet
with exactly the lake file's columns), and their statistics come from the Parquet footers. They
keep the store's codec (zstd); the files this module encodes get ``lake.compression``'s.

Failure modes and what happens:
- a snapshot bigger than memory: rows are sorted in memory only when they and the changes take at
  most ``SORT_MAX_BYTES`` decoded; a bigger base streams through in record batches, unsorted (split at the
  target all the same: its files' ranges overlap, which later rounds pay for, and compaction
  sorts). Only the bucket's changes (newest per key, bounded by the round's offsets) are held;
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
import math
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from operator import itemgetter

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq
from deltalake.transaction import AddAction

from tiering import failpoints
from tiering.kvstore.changelog import apply_changes, apply_sorted, newest_per_key
from tiering.kvstore.models import TableInfo
from tiering.conf.model import DEFAULT_COMPRESSION, DEFAULT_TARGET_FILE_MB
from tiering.kvstore.protocol import DELETE, OFFSET_COLUMN, OP_COLUMN, UPDATE
from tiering.lake.round_plan import BucketPlan, small
from tiering.lakestate.lake import LakeFile
from tiering.lakestate.layout import BUCKET_COLUMN, lake_schema
from tiering.storage.landed import LandedObject, copy_object
from tiering.storage.object_store import ObjectStore

__all__ = [
    "BucketTask", "BucketResult", "WrittenFile", "RewriteGroup", "write_bucket", "run_task", "run_tasks", "light",
    "file_schema",
    "merge_batches", "base_rows", "rewrite_groups", "SORT_MAX_BYTES",
]

_BATCH_ROWS = 256 * 1024
#: Threads of a Spark partition for its light tasks (:func:`run_tasks`).
PARTITION_THREADS = 8
#: The change a snapshot row stands for in a MERGE's source: the key's row as it is now. (An
#: Arrow scalar: a Python literal makes pyarrow try to import pandas on every call.)
_UPSERT = pa.scalar(UPDATE, pa.string())
_DELETE = pa.scalar(DELETE, pa.string())
_MIB = 1024 * 1024
#: A rewrite's rows are sorted in memory when they and its changes take at most this many bytes
#: decoded (a sort copies them once more, a splice does not); more stream through unsorted, as
#: they are read.
SORT_MAX_BYTES = 512 * _MIB
#: The rows :class:`_Encoding` samples (the first of a rewrite's), and at most their decoded bytes.
_SAMPLE_ROWS = 8192
_SAMPLE_BYTES = 4 * _MIB
#: A sampled column with a larger share of distinct values is written without a dictionary:
#: nearly unique. 8,192 rows drawn at random from k values are this share distinct at k = 39,000;
#: in a 78,000-row file a dictionary of that many values cost time, of 20,000 about broke even.
_UNIQUE_SHARE = 0.9
#: Reads a lake file of known size on S3 without a HEAD first (:func:`_batches`).
_PARQUET = pads.ParquetFileFormat()


@dataclass(frozen=True)
class BucketTask:
    """Everything a task needs to rewrite one bucket (picklable: it travels to an executor)."""

    table: TableInfo
    table_uri: str
    plan: BucketPlan
    store: ObjectStore
    #: the size the files written aim at (the round's ``lake.target_file_mb``)
    target_file_bytes: int = DEFAULT_TARGET_FILE_MB * _MIB
    #: their Parquet codec, as pyarrow names it (``lake.compression``)
    compression: str = DEFAULT_COMPRESSION


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
    """What a task returns: its files and, for a rewrite by file, the lake files they replace
    (paths as the log names them); or why it failed (a message naming the table and bucket).
    A failure is a value, not a raised error, so one bucket's failure fails its table only."""

    table: str
    bucket: int
    files: tuple[WrittenFile, ...] = ()
    error: str | None = None
    replaced: tuple[str, ...] = ()


@dataclass(frozen=True)
class RewriteGroup:
    """Lake files rewritten together, and the changes that land in them: the keys in their
    range, and new keys placed with them. Groups do not overlap: one key, one group."""

    files: tuple[LakeFile, ...]
    changes: pa.Table


def run_tasks(tasks: Iterable[BucketTask]) -> Iterator[BucketResult]:
    """A Spark partition's tasks (executor side): the light ones (:func:`light`) on
    :data:`PARTITION_THREADS` threads, the others one at a time beside them. A task of a tiny
    bucket is a few object-store requests, each a round trip (tens of ms on S3), and a
    partition holds hundreds of them in a round of many tables: one after another, the round
    waits for every trip in turn. The threads release the GIL while they wait and while pyarrow
    works; a heavy rewrite holds its rows in memory, so only one runs at a time, a snapshot
    that turns out not to be copyable (its columns differ from the lake's) included."""
    failpoints.hit("executor_bucket_write")
    one_heavy = threading.Lock()
    heavy: list[BucketTask] = []
    with ThreadPoolExecutor(PARTITION_THREADS, thread_name_prefix="bucket") as pool:
        futures = []
        for task in tasks:
            if light(task):
                futures.append(pool.submit(run_task, task, one_heavy))
            else:
                heavy.append(task)
        for task in heavy:
            yield run_task(task, one_heavy)
        for future in futures:
            yield future.result()


def light(task: BucketTask) -> bool:
    """Whether the task likely holds little in memory: a snapshot without changes, normally a
    byte copy (streamed), or a small rewrite (:func:`~tiering.lake.round_plan.small`). Decided
    from the plan alone: whether a snapshot's columns allow the copy takes its footers, read
    on the task's thread (:func:`run_task`)."""
    plan = task.plan
    return (plan.base == "snapshot" and not plan.has_changes) or not _holds_rows(plan)


def _holds_rows(plan: BucketPlan) -> bool:
    """Whether rewriting the bucket may hold many rows in memory: a snapshot's (the plan does not
    know its size) or a rewrite that is not small."""
    return plan.base == "snapshot" or not small([plan])


def run_task(task: BucketTask, one_heavy: AbstractContextManager[object] | None = None) -> BucketResult:
    """The bucket's write as a Spark task: every error comes back as a result. A rewrite that
    is not small (a snapshot's, of unknown size, included) holds ``one_heavy`` while it runs."""
    try:
        files, replaced = _write(task, one_heavy or nullcontext())
        return BucketResult(task.table.name, task.plan.bucket, tuple(files), replaced=replaced)
    except Exception as e:  # noqa: BLE001 - reported to the driver, which fails the table
        return BucketResult(task.table.name, task.plan.bucket, error=f"bucket {task.plan.bucket}: {type(e).__name__}: {e}")


def file_schema(table: TableInfo) -> pa.Schema:
    """The columns of a lake data file: the lake's, without the ``__bucket`` partition column."""
    lake = lake_schema(table)
    return lake.remove(lake.get_field_index(BUCKET_COLUMN))


def write_bucket(task: BucketTask) -> list[WrittenFile]:
    """Write ``task``'s bucket as it is after the round; no file when it ends up empty (for a
    rewrite by file: the files replacing those it rewrote, see :func:`run_task`)."""
    return _write(task)[0]


def _write(
    task: BucketTask, one_heavy: AbstractContextManager[object] = nullcontext()
) -> tuple[list[WrittenFile], tuple[str, ...]]:
    """The files written, and the lake files they replace when the bucket is rewritten by file
    (a heavy rewrite holding ``one_heavy``)."""
    schema = file_schema(task.table)
    plan = task.plan
    if _copyable(task, schema):
        return [_copy(task, path, schema) for path in plan.base_files], ()
    with one_heavy if _holds_rows(plan) else nullcontext():
        return _rewrite(task, schema)


def _rewrite(task: BucketTask, schema: pa.Schema) -> tuple[list[WrittenFile], tuple[str, ...]]:
    """The bucket decoded and written anew: whole, or by file (:func:`rewrite_groups`)."""
    plan = task.plan
    changes = _latest_changes(task) if plan.has_changes else None
    if not plan.by_file:
        return _write_rows(task, schema, plan.base_files, changes, None)[0], ()
    written: list[WrittenFile] = []
    encoding = None  # the first group's, for all: one bucket's rows have one shape
    groups = rewrite_groups(plan.lake_files, changes, task.table.primary_key[0]) if changes is not None else []
    for group in groups:
        files, encoding = _write_rows(task, schema, [f.uri for f in group.files], group.changes, encoding)
        written += files
    return written, tuple(f.path for g in groups for f in g.files)


def rewrite_groups(files: Sequence[LakeFile], changes: pa.Table, key: str) -> list[RewriteGroup]:
    """The files of a bucket a round must rewrite for ``changes`` (newest per key, deletes
    included; ``key`` the first key column), in groups that share no key.

    A file is rewritten when its range covers a changed key (every such file: ranges may
    overlap). An upsert of a key no range covers joins the rewrite of the nearest file below or
    above it, so it is written exactly once and ranges stay apart; a delete of such a key
    changes nothing. Overlapping rewritten files form one group (their rows are sorted
    together). A file without a range could hold any key: then every file is one group.

    The changes are sorted by ``key`` once, so every range, gap and group is a slice of them,
    found by binary search: the work in Python grows with the files, not with the changes.
    """
    if not changes.num_rows or not files:
        return []
    if not all(f.ranged for f in files) or not pa.types.is_integer(changes.schema.field(key).type):
        return [RewriteGroup(tuple(files), changes)]
    ordered = changes.take(pc.sort_indices(changes, [(key, "ascending")]))
    keys = ordered[key].combine_chunks()

    def between(low: int, high: int) -> tuple[int, int]:
        return _bisect(keys, low, right=False), _bisect(keys, high, right=True)

    chosen = {i for i, f in enumerate(files) if _nonempty(between(f.low, f.high))}
    homeless: dict[int, list[tuple[int, int]]] = {}  # file -> slices of new keys placed with it
    for (start, end), home in _gaps(files, keys):
        if start < end and pc.any(pc.not_equal(ordered[OP_COLUMN].slice(start, end - start), _DELETE)).as_py():
            chosen.add(home)
            homeless.setdefault(home, []).append((start, end))
    groups: list[list[int]] = []
    for i in sorted(chosen, key=lambda i: files[i].low):  # merge overlapping ranges, by low end
        if groups and files[i].low <= max(files[j].high for j in groups[-1]):
            groups[-1].append(i)
        else:
            groups.append([i])
    out = []
    for members in groups:
        # the members' ranges are contiguous: every key between their ends is covered by one
        inside = between(files[members[0]].low, max(files[j].high for j in members))
        slices = [inside, *(s for j in members for s in homeless.get(j, ()))]
        parts = [ordered.slice(a, b - a) for a, b in slices if a < b]
        out.append(RewriteGroup(tuple(files[j] for j in members), pa.concat_tables(parts)))
    return out


def _gaps(files: Sequence[LakeFile], keys: pa.Array) -> Iterator[tuple[tuple[int, int], int]]:
    """The slices of sorted ``keys`` no file range covers, each with the file its new keys join:
    below the lowest range, the file starting lowest; above the highest, the one ending highest;
    between two, the file ending closest below or starting closest above (below on a tie)."""
    spans: list[list[int]] = []  # [low, high, file starting lowest, file ending highest]
    for i in sorted(range(len(files)), key=lambda i: files[i].low):
        f = files[i]
        if spans and f.low <= spans[-1][1]:
            if f.high > spans[-1][1]:
                spans[-1][1], spans[-1][3] = f.high, i
        else:
            spans.append([f.low, f.high, i, i])
    yield (0, _bisect(keys, spans[0][0], right=False)), spans[0][2]
    for below, above in zip(spans, spans[1:]):
        middle = (below[1] + above[0]) // 2
        yield (_bisect(keys, below[1], right=True), _bisect(keys, middle, right=True)), below[3]
        yield (_bisect(keys, middle, right=True), _bisect(keys, above[0], right=False)), above[2]
    yield (_bisect(keys, spans[-1][1], right=True), len(keys)), spans[-1][3]


def _bisect(keys: pa.Array, value: int, *, right: bool) -> int:
    """Where ``value`` goes in sorted ``keys``: before equal keys, or after them with ``right``."""
    low, high = 0, len(keys)
    while low < high:
        mid = (low + high) // 2
        key = keys[mid].as_py()
        if key < value or (right and key == value):
            low = mid + 1
        else:
            high = mid
    return low


def _nonempty(bounds: tuple[int, int]) -> bool:
    return bounds[0] < bounds[1]


def _write_rows(
    task: BucketTask, schema: pa.Schema, files: Sequence[str], changes: pa.Table | None, encoding: _Encoding | None
) -> tuple[list[WrittenFile], _Encoding | None]:
    """``files``' rows with ``changes`` applied, written as files of about the task's target:
    sorted by key (:func:`apply_sorted`: spliced into already sorted rows, else filtered and
    sorted) when the files' rows and the changes take at most :data:`SORT_MAX_BYTES` decoded,
    else streamed as they come; encoded with ``encoding``, or as :class:`_Encoding` chooses from
    their first rows when it is None. Returns the files and the encoding used (``encoding`` when
    no row is left)."""
    keys = task.table.primary_key
    base = _batches(task.store, files, schema, {f.uri: f.size for f in task.plan.lake_files})
    held: list[pa.RecordBatch] = []
    decoded = changes.nbytes if changes is not None else 0  # the changes are held either way
    while decoded <= SORT_MAX_BYTES and (batch := next(base, None)) is not None:
        held.append(batch)
        decoded += batch.nbytes
    if decoded > SORT_MAX_BYTES:
        head, batches = _head(apply_changes(itertools.chain(held, base), changes, keys, schema), _SAMPLE_ROWS)
        sample = pa.Table.from_batches(head, schema)
        encoding = (encoding or _Encoding.of(sample, task.compression)).measured(sample)
        per_file = encoding.rows_per_file(task.target_file_bytes)
    else:
        data = apply_sorted(pa.Table.from_batches(held, schema), changes, keys, schema)
        if not data.num_rows:
            return [], encoding
        encoding = encoding or _Encoding.of(data, task.compression)
        pieces = 1
        # decoded, they could still fit one file: measure encoded (the bytes read and the changes,
        # an upper bound: spliced rows count their bytes slice by slice, which takes a while)
        if decoded > task.target_file_bytes:
            encoding = encoding.measured(data)
            pieces = max(1, round(data.num_rows / encoding.rows_per_file(task.target_file_bytes)))  # even: no small tail
        per_file = math.ceil(data.num_rows / pieces)
        batches = iter(data.to_batches(_BATCH_ROWS))
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
    task: BucketTask, schema: pa.Schema, encoding: _Encoding, batches: Iterator[pa.RecordBatch]
) -> list[WrittenFile]:
    """One new file of ``batches`` (none when they hold no row)."""
    plan = task.plan
    rel = _file_name(plan)
    stats = _Stats(schema)
    groups = _row_groups(batches)
    first = next(groups, None)
    if first is None:
        return []
    landed = _landing(task, rel)
    with landed as sink:
        with encoding.writer(sink, schema) as writer:
            for group in itertools.chain((first,), groups):
                writer.write_table(group)
                stats.add(group)
    return [WrittenFile(rel, plan.bucket, landed.size, stats.rows, stats.to_json(), int(time.time() * 1000))]


@dataclass(frozen=True)
class _Encoding:
    """How a bucket's new files are encoded, and so how many rows a file of the target holds:
    chosen from the first rows it writes (:data:`_SAMPLE_ROWS`), encoded once in memory with the
    files' codec (``lake.compression``: snappy takes about twice zstd's bytes a row).

    A dictionary pays only on a column whose values repeat; on a column of unique values (a
    key, ``__offset``, most floats) it is wasted work. pyarrow's default, a dictionary on every
    column, wrote the amplification benchmark's 78,000-row file in three times the time and
    1.8 times the bytes of dictionaries on its repeating columns only. So a column gets one
    when at most :data:`_UNIQUE_SHARE` of its sampled values are distinct.

    The rows per file come from the sample's encoded bytes per row, not the input files': those
    may be encoded otherwise (a snapshot the store wrote with pyarrow's defaults, which the
    bootstrap copies as it is), and the files a bucket's first rewrite splits it into would
    keep that error until compaction: a rewrite by file splits a file grown past the target but
    never fills one short of it. 8,192 of the amplification benchmark's rows estimated a
    115,000-row file's bytes per row within 1%; rows that compress far better (2.4 bytes a row)
    it overestimated by 40%, the footer and dictionaries weighing more on fewer rows: files
    land short of the target (80%), not past it.
    """

    dictionary: tuple[str, ...]
    compression: str
    #: None until :meth:`measured`: rows that fit one file decoded need no measure (a bucket of a
    #: few rows, most of a changed round's, would pay a second Parquet write for it)
    bytes_per_row: float | None = None

    @classmethod
    def of(cls, rows: pa.Table, compression: str) -> _Encoding:
        """The dictionary columns, from ``rows``' sample; pages compressed with ``compression``."""
        sample = _sample(rows)
        return cls(tuple(name for name, column in zip(sample.column_names, sample.columns) if _repeats(column)), compression)

    def measured(self, rows: pa.Table) -> _Encoding:
        """This encoding with its bytes per row: ``rows``' sample encoded in memory (once per bucket)."""
        if self.bytes_per_row is not None:
            return self
        sample = _sample(rows)
        sink = pa.BufferOutputStream()
        with self.writer(sink, sample.schema) as writer:
            writer.write_table(sample)
        return replace(self, bytes_per_row=sink.tell() / max(sample.num_rows, 1))

    def rows_per_file(self, target_bytes: int) -> int:
        assert self.bytes_per_row is not None, "measured() first"
        return max(1, int(target_bytes / self.bytes_per_row))

    def writer(self, sink: pa.NativeFile, schema: pa.Schema) -> pq.ParquetWriter:
        return pq.ParquetWriter(sink, schema, compression=self.compression, use_dictionary=list(self.dictionary))


def _sample(rows: pa.Table) -> pa.Table:
    """The first :data:`_SAMPLE_ROWS` of ``rows``, or fewer when those would exceed :data:`_SAMPLE_BYTES`
    (their bytes only are counted: on rows spliced of many slices, all of them take a while)."""
    first = rows.slice(0, _SAMPLE_ROWS)
    row_bytes = first.nbytes / max(first.num_rows, 1)
    return first.slice(0, max(1, int(_SAMPLE_BYTES / max(row_bytes, 1))))


def _repeats(column: pa.ChunkedArray) -> bool:
    """Whether at most :data:`_UNIQUE_SHARE` of the column's non-null values are distinct."""
    values = len(column) - column.null_count
    return pc.count_distinct(column).as_py() <= _UNIQUE_SHARE * values


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
        rows = _rows(task.store, plan.base_files, task.table.primary_key, file_schema(task.table), changes)
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


def _rows(
    store: ObjectStore, files: Sequence[str], keys: Sequence[str], schema: pa.Schema, changes: pa.Table | None
) -> Iterator[pa.RecordBatch]:
    """``files``' rows minus the changed keys, then the upserts (the file's columns)."""
    return apply_changes(_batches(store, files, schema), changes, keys, schema)


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


def _batches(
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
    for uri, path in zip(files, paths):
        if uri in known:
            fragment = _PARQUET.make_fragment(path, filesystem=fs, file_size=known[uri])
            yield from (_aligned(b, schema) for b in fragment.to_batches(batch_size=_BATCH_ROWS, use_threads=False))
            continue
        with fs.open_input_file(path) as handle:
            for batch in pq.ParquetFile(handle).iter_batches(batch_size=_BATCH_ROWS, use_threads=False):
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
