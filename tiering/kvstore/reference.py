"""The reference store behind the store seam (:mod:`tiering.kvstore.contract`): a thin adapter
over :class:`~tiering.kvstore.client.KvStoreClient`.

Failure modes are the client's (its typed errors, its retries of an unavailable store); this
module adds none of its own beyond reading the store's files: a snapshot's or a log segment's
file that is gone reads as ``SnapshotUnavailableError``, as the store's 410 does. The store keeps
the lease's epoch itself (409 ``FENCED_EPOCH``) and takes the lake's progress. Both classes hold
the client, which drops its session when pickled; the store also keeps its last listing's and
log ends' conversion, reused while the client hands back the very answer it converted (the
store's 304: an idle planner over 10,000 tables converts nothing).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Generic, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from tiering.epochs import JobEpoch
from tiering.errors import LeaseUnsupportedError, NotFoundError, SnapshotUnavailableError, StoreError
from tiering.kvstore import models
from tiering.kvstore.client import KvStoreClient
from tiering.kvstore.contract import (
    OFFSET_COLUMN,
    BucketId,
    BucketLog,
    BucketReader,
    LakeProgress,
    SnapshotRef,
    StoreColumn,
    StoreTable,
    TableClaims,
    TableLog,
    changelog_schema,
)
from tiering.kvstore.types import arrow_type

__all__ = ["ReferenceStore", "ReferenceBucketReader", "store_table", "bucket_log", "serves_leases"]

R = TypeVar("R")
A = TypeVar("A")
V = TypeVar("V")

#: The statuses a store without the lease API answers its routes with (an unknown route, a method
#: it does not serve there).
_NO_ROUTE = frozenset({404, 405})


def store_table(info: models.TableInfo) -> StoreTable:
    """The store's description of a table as the seam's value (every column nullable but the key's)."""
    columns = tuple(
        StoreColumn(c.name, c.type, arrow_type(c.type), nullable=c.name not in info.primary_key) for c in info.columns
    )
    return StoreTable(info.name, info.table_id, columns, tuple(info.primary_key), info.num_buckets)


def bucket_log(log: models.BucketLog) -> BucketLog:
    """The store's answer for one bucket's log as the seam's value."""
    return BucketLog(log.bucket, log.log_start_offset, log.log_end_offset)


def table_log(log: models.NamedTableLog) -> TableLog:
    """The store's answer for one table's log, its last lake report with it, as the seam's value
    (the report's version and epoch are not in that answer: 0)."""
    reported = (
        LakeProgress(
            log.table_id,
            epoch=JobEpoch(0),
            lake_version=0,
            offsets={int(b): o for b, o in log.lake.items()},
            job=log.lake_job,
            group=log.lake_group,
        )
        if log.lake is not None
        else None
    )
    return TableLog(log.table_id, {b.bucket: bucket_log(b) for b in log.buckets}, reported)


def serves_leases(client: KvStoreClient) -> bool:
    """Whether the store serves the lease API at all: its list answers, whoever holds what. Asked
    only when a lease call got a 404 or 405 that is not the store's unknown lease."""
    try:
        client.list_leases()
    except StoreError as e:
        if e.status in _NO_ROUTE:
            return False
        raise
    return True


def _lease_call(client: KvStoreClient, call: Callable[[], R]) -> R:
    """``call()``, a store without the lease API found out: ``LeaseUnsupportedError``."""
    try:
        return call()
    except StoreError as e:
        if e.status not in _NO_ROUTE or e.code == "LEASE_NOT_FOUND" or serves_leases(client):
            raise
        raise LeaseUnsupportedError(
            f"the KV store at {client.url} has no lease API ({e})", status=e.status, lease_id=e.lease_id
        ) from e


def _same(one: Sequence[object], other: Sequence[object]) -> bool:
    """Whether two answers hold the very same objects, in the same order."""
    return len(one) == len(other) and all(map(operator.is_, one, other))


def _store_tables(infos: list[models.TableInfo]) -> list[StoreTable]:
    return [store_table(info) for info in infos]


def _table_logs(logs: list[models.NamedTableLog]) -> dict[str, TableLog]:
    return {log.name: table_log(log) for log in logs}


class _Converted(Generic[A, V]):
    """The seam's value of the client's last answer, kept with that answer's objects and replaced
    as one value (the planner's threads share a store): the client keeps its last answer by ETag
    and hands back the same objects while the store answers 304. The value is shared: a caller
    hands out a copy."""

    def __init__(self, convert: Callable[[list[A]], V]) -> None:
        self._convert = convert
        self._last: tuple[list[A], V] | None = None

    def __call__(self, answer: list[A]) -> V:
        last = self._last
        if last is not None and _same(last[0], answer):
            return last[1]
        value = self._convert(answer)
        self._last = (answer, value)
        return value


class ReferenceStore:
    """:class:`~tiering.kvstore.contract.PlanningStore` of the reference store."""

    def __init__(self, client: KvStoreClient) -> None:
        self.client = client
        self._tables: _Converted[models.TableInfo, list[StoreTable]] = _Converted(_store_tables)
        self._logs: _Converted[models.NamedTableLog, dict[str, TableLog]] = _Converted(_table_logs)

    def __repr__(self) -> str:
        return f"ReferenceStore({self.client.url!r})"

    def tables(self) -> list[StoreTable]:
        return list(self._tables(self.client.list_tables()))

    def table(self, name: str) -> StoreTable:
        return store_table(self.client.get_table(name))

    def log_ends(self, tables: Sequence[str] | None = None) -> dict[str, TableLog]:
        if tables is None:
            return dict(self._logs(list(self.client.logs().values())))
        return _table_logs(list(self.client.logs(list(tables)).values())) if tables else {}

    def latest_snapshots(self, table: str) -> dict[int, SnapshotRef]:
        answer = self.client.latest_snapshots(table)
        return {
            s.bucket: SnapshotRef(answer.table_id, s.bucket, s.snapshot_id, s.log_offset, s.row_count, s.size_bytes)
            for s in answer.buckets
        }

    def snapshot_available(self, table: str, ref: SnapshotRef) -> bool:
        try:
            self.client.get_snapshot(table, ref.bucket, ref.snapshot_id)
        except (SnapshotUnavailableError, NotFoundError):
            return False
        return True

    def create(self, lease_id: str, epoch: int, duration_ms: int) -> None:
        _lease_call(self.client, lambda: self.client.acquire_lease(lease_id, epoch, duration_ms, []))

    def acquire(
        self,
        lease_id: str,
        epoch: int,
        duration_ms: int,
        snapshots: Sequence[SnapshotRef],
        owners: TableClaims | None = None,
    ) -> list[SnapshotRef]:
        by_key = {(s.table_id, s.bucket, s.snapshot_id): s for s in snapshots}
        refs = [models.SnapshotRef(table_id=s.table_id, bucket=s.bucket, snapshot_id=s.snapshot_id) for s in snapshots]
        wired = _owners(owners)
        result = _lease_call(self.client, lambda: self.client.acquire_lease(lease_id, epoch, duration_ms, refs, wired))
        return [by_key[(u.table_id, u.bucket, u.snapshot_id)] for u in result.unavailable]

    def renew(self, lease_id: str, epoch: int, duration_ms: int) -> None:
        _lease_call(self.client, lambda: self.client.renew_lease(lease_id, epoch, duration_ms))

    def held(self, lease_id: str) -> list[BucketId] | None:
        try:
            lease = _lease_call(self.client, lambda: self.client.get_lease(lease_id))
        except NotFoundError as e:
            if e.code != "LEASE_NOT_FOUND":
                raise
            return []
        return sorted({BucketId(s.table_id, s.bucket) for s in lease.snapshots}, key=lambda b: (b.table_id, b.bucket))

    def release(self, lease_id: str, epoch: int, buckets: Sequence[BucketId]) -> None:
        refs = [models.BucketRef(table_id=b.table_id, bucket=b.bucket) for b in buckets]
        _lease_call(self.client, lambda: self.client.release_lease(lease_id, epoch, refs))

    def drop(self, lease_id: str, epoch: int) -> None:
        _lease_call(self.client, lambda: self.client.drop_lease(lease_id, epoch))

    @property
    def lake_progress(self) -> ReferenceStore:
        return self

    def report(self, progress: Mapping[str, LakeProgress]) -> dict[str, StoreError | None]:
        reports = {
            table: models.LakeReport(
                table_id=p.table_id,
                epoch=p.epoch,
                lake_version=p.lake_version,
                buckets={str(bucket): offset for bucket, offset in sorted(p.offsets.items())},
                job=p.job,
                group=p.group,
                table_epoch=p.table_epoch,
            )
            for table, p in progress.items()
        }
        return self.client.report_lakes(reports)

    @property
    def files(self) -> ReferenceStore:
        return self

    def snapshot_files(self, table: str, ref: SnapshotRef) -> list[str]:
        return list(self.client.get_snapshot(table, ref.bucket, ref.snapshot_id).files)

    def log_files(
        self, ranges: Mapping[str, Sequence[tuple[int, int, int]]]
    ) -> dict[str, list[list[str]] | StoreError]:
        requests = {
            table: [models.LogRange(bucket=b, from_offset=start, to_offset=end) for b, start, end in wanted]
            for table, wanted in ranges.items()
            if wanted
        }
        answers = self.client.segments(requests)
        return {
            table: answer if isinstance(answer, StoreError) else [[seg.file for seg in found] for found in answer]
            for table, answer in answers.items()
        }

    def bucket_reader(self) -> BucketReader:
        return ReferenceBucketReader(self.client)

    def with_retry_deadline(self, seconds: float) -> ReferenceStore:
        return ReferenceStore(self.client.with_retry_deadline(seconds))

    def close(self) -> None:
        """Nothing held: the client's session closes with the process."""


def _owners(owners: TableClaims | None) -> models.TableOwners | None:
    """A group member's claims as the store's acquire takes them."""
    if owners is None:
        return None
    tables = [models.TableEpoch(table_id=i, table_epoch=e) for i, e in sorted(owners.table_epochs.items())]
    return models.TableOwners(group=owners.group, job=owners.job, tables=tables)


class ReferenceBucketReader:
    """:class:`~tiering.kvstore.contract.BucketReader` of the reference store: the Parquet files
    the store names, read with pyarrow from wherever they live (a local path, ``s3://``)."""

    def __init__(self, client: KvStoreClient) -> None:
        self.client = client

    def snapshot_rows(self, table: StoreTable, ref: SnapshotRef) -> Iterator[pa.RecordBatch]:
        snapshot = self.client.get_snapshot(table.name, ref.bucket, ref.snapshot_id)
        yield from _read(table.name, snapshot.files, table.arrow_schema)

    def changelog(self, table: StoreTable, bucket: int, start: int, end: int) -> Iterator[pa.RecordBatch]:
        if start >= end:
            return
        files = [s.file for s in self.client.log_segments(table.name, bucket, start, end)]
        low, high = pa.scalar(start, pa.int64()), pa.scalar(end, pa.int64())
        for batch in _read(table.name, files, changelog_schema(table)):
            offsets = batch.column(OFFSET_COLUMN)
            yield batch.filter(pc.and_(pc.greater_equal(offsets, low), pc.less(offsets, high)))


def _read(table: str, files: Sequence[str], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The files' rows with ``schema``'s columns (a column a file lacks, added after it was
    written, reads as nulls)."""
    for uri in files:
        filesystem, path = pafs.FileSystem.from_uri(uri) if "://" in uri else (pafs.LocalFileSystem(), uri)
        try:
            handle = filesystem.open_input_file(path)
        except FileNotFoundError as e:
            raise SnapshotUnavailableError(f"table {table!r}: store file {uri} is gone", table=table) from e
        with handle:
            parquet = pq.ParquetFile(handle)
            present = set(parquet.schema_arrow.names)
            for batch in parquet.iter_batches(columns=[n for n in schema.names if n in present], use_threads=False):
                columns = [
                    batch.column(f.name) if f.name in present else pa.nulls(batch.num_rows, f.type) for f in schema
                ]
                yield pa.RecordBatch.from_arrays(columns, schema=schema)
