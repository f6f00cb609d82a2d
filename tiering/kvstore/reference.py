"""The reference store behind the store seam (:mod:`tiering.kvstore.contract`): a thin adapter
over :class:`~tiering.kvstore.client.KvStoreClient`.

Failure modes are the client's (its typed errors, its retries of an unavailable store); this
module adds none of its own beyond reading the store's files: a snapshot's or a log segment's
file that is gone reads as ``SnapshotUnavailableError``, as the store's 410 does. The store keeps
the lease's epoch itself (409 ``FENCED_EPOCH``) and takes the lake's progress. Both classes hold
only the client, which drops its session when pickled.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from tiering.errors import NotFoundError, SnapshotUnavailableError
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
    TableLog,
    changelog_schema,
)
from tiering.kvstore.types import arrow_type

__all__ = ["ReferenceStore", "ReferenceBucketReader", "store_table", "bucket_log"]


def store_table(info: models.TableInfo) -> StoreTable:
    """The store's description of a table as the seam's value (every column nullable but the key's)."""
    columns = tuple(
        StoreColumn(c.name, c.type, arrow_type(c.type), nullable=c.name not in info.primary_key) for c in info.columns
    )
    return StoreTable(info.name, info.table_id, columns, tuple(info.primary_key), info.num_buckets)


def bucket_log(log: models.BucketLog) -> BucketLog:
    """The store's answer for one bucket's log as the seam's value."""
    return BucketLog(log.bucket, log.log_start_offset, log.log_end_offset)


class ReferenceStore:
    """:class:`~tiering.kvstore.contract.PlanningStore` of the reference store."""

    def __init__(self, client: KvStoreClient) -> None:
        self.client = client

    def __repr__(self) -> str:
        return f"ReferenceStore({self.client.url!r})"

    def tables(self) -> list[StoreTable]:
        return [store_table(info) for info in self.client.list_tables()]

    def table(self, name: str) -> StoreTable:
        return store_table(self.client.get_table(name))

    def log_ends(self, tables: Sequence[str]) -> dict[str, TableLog]:
        found = self.client.logs(list(tables)) if tables else {}
        return {
            name: TableLog(log.table_id, {b.bucket: bucket_log(b) for b in log.buckets}) for name, log in found.items()
        }

    def latest_snapshots(self, table: str) -> dict[int, SnapshotRef]:
        answer = self.client.latest_snapshots(table)
        return {s.bucket: SnapshotRef(answer.table_id, s.bucket, s.snapshot_id, s.log_offset) for s in answer.buckets}

    def snapshot_available(self, table: str, ref: SnapshotRef) -> bool:
        try:
            self.client.get_snapshot(table, ref.bucket, ref.snapshot_id)
        except (SnapshotUnavailableError, NotFoundError):
            return False
        return True

    def create(self, lease_id: str, epoch: int, duration_ms: int) -> None:
        self.client.acquire_lease(lease_id, epoch, duration_ms, [])

    def acquire(
        self, lease_id: str, epoch: int, duration_ms: int, snapshots: Sequence[SnapshotRef]
    ) -> list[SnapshotRef]:
        by_key = {(s.table_id, s.bucket, s.snapshot_id): s for s in snapshots}
        refs = [models.SnapshotRef(table_id=s.table_id, bucket=s.bucket, snapshot_id=s.snapshot_id) for s in snapshots]
        result = self.client.acquire_lease(lease_id, epoch, duration_ms, refs)
        return [by_key[(u.table_id, u.bucket, u.snapshot_id)] for u in result.unavailable]

    def renew(self, lease_id: str, epoch: int, duration_ms: int) -> None:
        self.client.renew_lease(lease_id, epoch, duration_ms)

    def release(self, lease_id: str, epoch: int, buckets: Sequence[BucketId]) -> None:
        refs = [models.BucketRef(table_id=b.table_id, bucket=b.bucket) for b in buckets]
        self.client.release_lease(lease_id, epoch, refs)

    def drop(self, lease_id: str, epoch: int) -> None:
        self.client.drop_lease(lease_id, epoch)

    @property
    def lake_progress(self) -> ReferenceStore:
        return self

    def report(self, table: str, job: str, progress: LakeProgress) -> None:
        buckets = {str(bucket): offset for bucket, offset in progress.offsets.items()}
        report = models.LakeReport(
            table_id=progress.table_id,
            epoch=progress.epoch,
            lake_version=progress.lake_version,
            buckets=buckets,
            job=job,
        )
        self.client.report_lake(table, report)

    def bucket_reader(self) -> BucketReader:
        return ReferenceBucketReader(self.client)


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
