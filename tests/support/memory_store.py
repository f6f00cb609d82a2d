"""A KV store behind the store seam, in memory: the catalog and the job-scoped lease as
:mod:`tiering.kvstore.contract` states them, for unit tests of the code on the seam (the job lease
and its release points) without a store process.

It keeps the contract's rules, the ones the reference store's ``server/leases.py`` keeps: every
lease verb carries an epoch and one below the lease's is refused (``FencedEpochError``); a hold
lasts ``duration_ms`` after the last acquire or renewal on the store's clock, which only the test
moves (:meth:`MemoryStore.advance`); an expired lease is unknown (``LeaseNotFoundError``) and holds
nothing, and its epoch outlives it; one hold per bucket, a newer snapshot replacing it; a group
member's claim below a table epoch seen is refused whole (``TableEpochFencedError``); the GC
(:meth:`MemoryStore.collect`) deletes only what no live lease holds. What a real store does under
faults is the integration tests' and the contract suite's (``tests/integration/kvstore_contract``):
here a fault is one the test names (:meth:`MemoryStore.refuse`), and ``lists_holds`` False and
``lease_api`` False are a store like Fluss and a store without the lease API.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tiering.errors import (
    FencedEpochError,
    LeaseNotFoundError,
    LeaseUnsupportedError,
    TableEpochFencedError,
    TableNotFoundError,
)
from tiering.kvstore.contract import BucketId, BucketLog, SnapshotRef, StoreTable, TableClaims, TableLog

__all__ = ["MemoryStore", "LEASE_VERBS"]

LEASE_VERBS = ("create", "acquire", "held", "renew", "release", "drop")


@dataclass
class _Lease:
    epoch: int
    #: store clock ms; 0: ended (expired and looked at, or dropped), its epoch kept
    expires_at_ms: int
    #: bucket -> the snapshot held
    holds: dict[BucketId, int] = field(default_factory=dict)


class MemoryStore:
    """A :class:`~tiering.kvstore.contract.StoreCatalog` and
    :class:`~tiering.kvstore.contract.SnapshotLease` over ``tables``. ``calls`` is its request log:
    each verb it answered or refused, in order."""

    def __init__(self, tables: Iterable[StoreTable] = (), *, lists_holds: bool = True, lease_api: bool = True) -> None:
        self._tables = {t.name: t for t in tables}
        self.lists_holds = lists_holds
        self.lease_api = lease_api
        self.now_ms = 1_000_000
        self.calls: list[str] = []
        self._leases: dict[str, _Lease] = {}
        self._snapshots: dict[str, dict[int, SnapshotRef]] = {}
        self._collected: set[SnapshotRef] = set()
        self._table_epochs: dict[int, int] = {}
        self._refusals: dict[str, list[Exception]] = {}
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return "MemoryStore()"

    # what the test does to the store

    def advance(self, ms: int) -> None:
        """Move the store's clock."""
        with self._lock:
            self.now_ms += ms

    def snapshot(self, table: str, bucket: int, snapshot_id: int, log_offset: int) -> SnapshotRef:
        """The store took a snapshot of ``table``'s ``bucket``: the bucket's newest."""
        with self._lock:
            ref = SnapshotRef(self._tables[table].table_id, bucket, snapshot_id, log_offset)
            self._snapshots.setdefault(table, {})[bucket] = ref
            return ref

    def collect(self, *refs: SnapshotRef) -> list[SnapshotRef]:
        """The GC: deletes the files of each of ``refs`` that no live lease holds; returns those."""
        with self._lock:
            held = {(b.table_id, b.bucket, s) for lease in self._live_leases() for b, s in lease.holds.items()}
            gone = [r for r in refs if (r.table_id, r.bucket, r.snapshot_id) not in held]
            self._collected.update(gone)
            return gone

    def refuse(self, verb: str, error: Exception, times: int = 1) -> None:
        """The next ``times`` calls of ``verb`` raise ``error`` and change nothing."""
        with self._lock:
            self._refusals.setdefault(verb, []).extend([error] * times)

    def holds(self, lease_id: str) -> dict[BucketId, int]:
        """What the lease holds now, bucket -> snapshot id, whatever ``lists_holds`` says."""
        with self._lock:
            lease = self._live(lease_id)
            return dict(lease.holds) if lease else {}

    def lease_epoch(self, lease_id: str) -> int | None:
        """The highest epoch the lease has seen (an ended lease's too); None: never known."""
        with self._lock:
            lease = self._leases.get(lease_id)
            return lease.epoch if lease else None

    def expires_at_ms(self, lease_id: str) -> int | None:
        """When the live lease expires on the store's clock; None: not live."""
        with self._lock:
            lease = self._live(lease_id)
            return lease.expires_at_ms if lease else None

    # StoreCatalog

    def tables(self) -> list[StoreTable]:
        with self._lock:
            self.calls.append("tables")
            return list(self._tables.values())

    def table(self, name: str) -> StoreTable:
        with self._lock:
            if name not in self._tables:
                raise TableNotFoundError(f"table {name!r} not found", code="TABLE_NOT_FOUND", table=name)
            return self._tables[name]

    def log_ends(self, tables: Sequence[str] | None = None) -> dict[str, TableLog]:
        with self._lock:
            names = self._tables if tables is None else [n for n in tables if n in self._tables]
            return {name: self._log(self._tables[name]) for name in names}

    def latest_snapshots(self, table: str) -> dict[int, SnapshotRef]:
        with self._lock:
            return dict(self._snapshots.get(self.table(table).name, {}))

    def snapshot_available(self, table: str, ref: SnapshotRef) -> bool:
        with self._lock:
            return ref not in self._collected

    # SnapshotLease

    def create(self, lease_id: str, epoch: int, duration_ms: int) -> None:
        self.acquire(lease_id, epoch, duration_ms, [])

    def acquire(
        self,
        lease_id: str,
        epoch: int,
        duration_ms: int,
        snapshots: Sequence[SnapshotRef],
        owners: TableClaims | None = None,
    ) -> list[SnapshotRef]:
        with self._lock:
            self._called("acquire")
            lease = self._leases.get(lease_id)
            if lease is not None:
                self._check_epoch(lease_id, lease, epoch)
                if lease.expires_at_ms <= self.now_ms:
                    lease.holds.clear()
            if owners is not None:
                self._claim(lease_id, owners)
            lease = self._leases.setdefault(lease_id, _Lease(epoch, 0))
            lease.epoch = max(lease.epoch, epoch)
            lease.expires_at_ms = self.now_ms + duration_ms
            gone = [s for s in snapshots if s in self._collected]
            for s in snapshots:
                if s not in self._collected:
                    lease.holds[BucketId(s.table_id, s.bucket)] = s.snapshot_id
            return gone

    def held(self, lease_id: str) -> list[BucketId] | None:
        with self._lock:
            self._called("held")
            if not self.lists_holds:
                return None
            lease = self._live(lease_id)
            return sorted(lease.holds, key=lambda b: (b.table_id, b.bucket)) if lease else []

    def renew(self, lease_id: str, epoch: int, duration_ms: int) -> None:
        with self._lock:
            self._called("renew")
            lease = self._known(lease_id, epoch)
            lease.epoch = epoch
            lease.expires_at_ms = self.now_ms + duration_ms

    def release(self, lease_id: str, epoch: int, buckets: Sequence[BucketId]) -> None:
        with self._lock:
            self._called("release")
            lease = self._known(lease_id, epoch)
            lease.epoch = epoch
            for bucket in buckets:
                lease.holds.pop(bucket, None)

    def drop(self, lease_id: str, epoch: int) -> None:
        with self._lock:
            self._called("drop")
            lease = self._known(lease_id, epoch)
            lease.holds.clear()
            lease.expires_at_ms = 0

    def _called(self, verb: str) -> None:
        """Logs the call; raises what the store answers instead of doing it, if anything."""
        self.calls.append(verb)
        if not self.lease_api:
            raise LeaseUnsupportedError(f"{self!r} has no lease API", code="NOT_FOUND", status=404)
        refusals = self._refusals.get(verb)
        if refusals:
            raise refusals.pop(0)

    def _live(self, lease_id: str) -> _Lease | None:
        lease = self._leases.get(lease_id)
        return lease if lease is not None and lease.expires_at_ms > self.now_ms else None

    def _live_leases(self) -> list[_Lease]:
        return [lease for lease in self._leases.values() if lease.expires_at_ms > self.now_ms]

    def _known(self, lease_id: str, epoch: int) -> _Lease:
        """The live lease, its epoch checked: unknown, expired and dropped are one answer."""
        lease = self._live(lease_id)
        if lease is None:
            raise LeaseNotFoundError(f"lease {lease_id!r} not found", code="LEASE_NOT_FOUND", lease_id=lease_id)
        self._check_epoch(lease_id, lease, epoch)
        return lease

    @staticmethod
    def _check_epoch(lease_id: str, lease: _Lease, epoch: int) -> None:
        if epoch < lease.epoch:
            raise FencedEpochError(
                f"lease {lease_id!r}: epoch {epoch} is below {lease.epoch}", lease_id=lease_id, epoch=epoch
            )

    def _claim(self, lease_id: str, owners: TableClaims) -> None:
        """A group member's claims, refused whole when one table has seen a higher table epoch."""
        moved = sorted(t for t, e in owners.table_epochs.items() if e < self._table_epochs.get(t, e))
        if moved:
            raise TableEpochFencedError(
                f"acquire of lease {lease_id!r}: table_ids {moved} moved to a higher table epoch",
                code="TABLE_EPOCH_FENCED",
                lease_id=lease_id,
            )
        for table_id, table_epoch in owners.table_epochs.items():
            self._table_epochs[table_id] = max(table_epoch, self._table_epochs.get(table_id, table_epoch))

    def _log(self, table: StoreTable) -> TableLog:
        snapshots: Mapping[int, SnapshotRef] = self._snapshots.get(table.name, {})
        ends = {b: snapshots[b].log_offset if b in snapshots else 0 for b in range(table.num_buckets)}
        return TableLog(table.table_id, {b: BucketLog(b, 0, end) for b, end in ends.items()})
