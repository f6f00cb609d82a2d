"""HTTP client of the KV store protocol (DESIGN §3).

INTERFACE CONTRACT — the store helper implements the bodies; the signatures are fixed because
the lease, enumerator and source code are written against them concurrently.

Failure modes: connection errors, timeouts and 5xx/503 raise StoreUnavailableError after the
retry policy gives up; every 4xx maps to a typed error from tiering.errors (409 FENCED_EPOCH ->
FencedEpochError, 404 on a lease -> LeaseNotFoundError, 410 -> SnapshotUnavailableError, ...)
and is never retried. The client is pickled into Spark executors: the requests.Session is
created lazily and dropped on pickling.
"""

from __future__ import annotations

import pyarrow as pa

from tiering.kvstore.models import (
    AcquireResult,
    BucketRef,
    LakeReport,
    Lease,
    LogSegment,
    Snapshot,
    SnapshotRef,
    TableInfo,
    TableLog,
    TableSnapshots,
    TableSpec,
)


class KvStoreClient:
    def __init__(self, url: str, token: str | None = None, timeout_s: float = 30.0) -> None: ...

    def health(self) -> bool: ...

    def create_table(self, spec: TableSpec) -> TableInfo: ...

    def list_tables(self) -> list[TableInfo]: ...

    def get_table(self, name: str) -> TableInfo: ...

    def drop_table(self, name: str) -> None: ...

    def upsert(self, table: str, rows: list[dict]) -> None: ...

    def delete(self, table: str, keys: list[dict]) -> None: ...

    def write_arrow(self, table: str, data: pa.Table | pa.RecordBatch, op: str = "upsert") -> None: ...

    def take_snapshots(self, table: str) -> TableSnapshots: ...

    def latest_snapshots(self, table: str) -> TableSnapshots: ...

    def get_snapshot(self, table: str, bucket: int, snapshot_id: int) -> Snapshot: ...

    def log_info(self, table: str) -> TableLog: ...

    def log_segments(self, table: str, bucket: int, from_offset: int, to_offset: int) -> list[LogSegment]: ...

    def acquire_lease(
        self, lease_id: str, epoch: int, duration_ms: int, snapshots: list[SnapshotRef]
    ) -> AcquireResult: ...

    def renew_lease(self, lease_id: str, epoch: int, duration_ms: int) -> Lease: ...

    def release_lease(self, lease_id: str, epoch: int, buckets: list[BucketRef]) -> Lease: ...

    def drop_lease(self, lease_id: str, epoch: int) -> None: ...

    def list_leases(self) -> list[Lease]: ...

    def get_lease(self, lease_id: str) -> Lease: ...

    def report_lake(self, table: str, report: LakeReport) -> None: ...

    def get_lake(self, table: str) -> LakeReport | None: ...

    def metrics(self) -> str: ...
