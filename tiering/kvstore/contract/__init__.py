"""The store seam: what planning and a round need from a KV store, in store-neutral values.

Failure modes it guards against: a store's own vocabulary leaking into the job (the reference
store's HTTP models, Fluss's ``TableBucket`` and boxed Longs), so that a second store means a
second job; an edge read two ways (which offset is exclusive, what "unavailable" means); a
reader on an executor holding a driver's connection. Two implementations keep this honest: the
reference store's (:mod:`tiering.kvstore.reference`) and Apache Fluss's
(:mod:`tiering.fluss.store`), and one contract test suite runs against both as real processes
(``tests/integration/kvstore_contract``).

Split by where it runs (docs/DESIGN.md §3, "The store seam"):

- :class:`PlanningStore`, the driver's and the planning process's: the catalog
  (:class:`StoreCatalog`: tables, every bucket's log ends in one call, the latest snapshots),
  the job-scoped lease (:class:`SnapshotLease`) and, where the store takes one, the lake
  progress report (:class:`LakeProgressReport`);
- :class:`BucketReader`, an executor's: one bucket's snapshot rows and one bucket's changelog
  range as Arrow batches with the system columns of :mod:`tiering.kvstore.contract.columns`. It is
  pickled into Spark's Python workers: it holds no connection, only what makes one.

Offsets are a bucket's changelog positions: increasing and unique within the bucket, not
necessarily dense (Fluss's log holds ``-U`` records a reader drops). Every end is exclusive: a
bucket's log ``end``, a snapshot's ``log_offset`` (the snapshot holds every change below it), a
changelog range's ``end``. Epochs are of two kinds, each its own type: a leadership term's
(:data:`~tiering.epochs.JobEpoch`), which every lease call and lake report carries, and in a
tiering group a table's (:data:`~tiering.epochs.TableEpoch`), which a member's claims and reports
add. Errors are :mod:`tiering.errors`' and say what is retryable:
``StoreUnavailableError`` (a store restarting, a timeout) is; ``TableNotFoundError``,
``SnapshotUnavailableError`` (a snapshot's files are gone: plan from a newer one) and
``FencedEpochError`` (a newer term) are not.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import pyarrow as pa

from tiering.epochs import JobEpoch, TableEpoch
from tiering.errors import StoreError
from tiering.kvstore.contract.columns import (
    DELETE,
    INSERT,
    OFFSET_COLUMN,
    OFFSET_TYPE,
    OP_COLUMN,
    OPS,
    TIMESTAMP_COLUMN,
    TIMESTAMP_TYPE,
    UPDATE,
)

__all__ = [
    "StoreColumn",
    "StoreTable",
    "BucketLog",
    "TableLog",
    "SnapshotRef",
    "BucketId",
    "LakeProgress",
    "TableClaims",
    "StoreFiles",
    "StoreCatalog",
    "SnapshotLease",
    "LakeProgressReport",
    "PlanningStore",
    "BucketReader",
    "changelog_schema",
    "OFFSET_COLUMN",
    "OP_COLUMN",
    "TIMESTAMP_COLUMN",
    "OFFSET_TYPE",
    "TIMESTAMP_TYPE",
    "INSERT",
    "UPDATE",
    "DELETE",
    "OPS",
]


@dataclass(frozen=True)
class StoreColumn:
    """A user column: its Spark SQL type name (as the lake and Spark spell it) and the Arrow type
    its values are read as. ``nullable`` False: the store refuses a null (a primary-key column)."""

    name: str
    spark_type: str
    arrow_type: pa.DataType
    nullable: bool = True


@dataclass(frozen=True)
class StoreTable:
    """A table as the job plans it. ``table_id`` changes when the table is dropped and re-created
    under the same name: a position reached for one id never counts for another."""

    name: str
    table_id: int
    columns: tuple[StoreColumn, ...]
    primary_key: tuple[str, ...]
    num_buckets: int

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns]
        missing = [k for k in self.primary_key if k not in names]
        if not self.primary_key or missing:
            raise ValueError(f"table {self.name!r}: primary key {list(self.primary_key)} not in its columns {names}")
        if self.num_buckets < 1:
            raise ValueError(f"table {self.name!r}: num_buckets must be >= 1, got {self.num_buckets}")

    @property
    def arrow_schema(self) -> pa.Schema:
        """The user columns, as a snapshot's rows carry them."""
        return pa.schema([pa.field(c.name, c.arrow_type, c.nullable) for c in self.columns])


def changelog_schema(table: StoreTable) -> pa.Schema:
    """A changelog batch's columns: the user columns (nullable: a ``-D`` may carry only the key),
    then ``__offset``, ``__op`` (``+I``, ``+U``, ``-D``) and ``__timestamp``."""
    user = [pa.field(c.name, c.arrow_type) for c in table.columns]
    system = [
        pa.field(OFFSET_COLUMN, OFFSET_TYPE),
        pa.field(OP_COLUMN, pa.string()),
        pa.field(TIMESTAMP_COLUMN, TIMESTAMP_TYPE),
    ]
    return pa.schema(user + system)


@dataclass(frozen=True)
class BucketLog:
    """One bucket's log: ``start`` the first offset still readable (older changes were deleted or
    truncated), ``end`` the exclusive end of what a reader can read now."""

    bucket: int
    start: int
    end: int


@dataclass(frozen=True)
class TableLog:
    """Every bucket's log of one table, read in one call, for ``table_id``. ``reported``: the
    store's last lake report of the table (this ``table_id``'s), where the store keeps reports
    (:class:`LakeProgressReport`); None before the first and from a store that keeps none. A
    planner starting cold tells an idle table from one to read by it, without opening its lake,
    and a round finds out from it which job tiers the table."""

    table_id: int
    buckets: Mapping[int, BucketLog] = field(default_factory=dict)
    reported: LakeProgress | None = None


@dataclass(frozen=True)
class SnapshotRef:
    """A bucket's snapshot: it holds every change of the bucket below ``log_offset`` (exclusive).
    ``row_count`` and ``size_bytes``: what the store says of its size, where it says (a round's
    byte limit estimates with them); None: the store does not say. They are not part of the
    snapshot's identity."""

    table_id: int
    bucket: int
    snapshot_id: int
    log_offset: int
    row_count: int | None = field(default=None, compare=False)
    size_bytes: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class BucketId:
    table_id: int
    bucket: int


@dataclass(frozen=True)
class LakeProgress:
    """What a job's lake holds of a table: per bucket the exclusive log offset tiered, as of the
    lake's ``lake_version``, reported under the job's ``epoch`` by ``job`` (None: a report that
    names none). ``group`` and ``table_epoch`` come together: a tiering group member's report,
    ordered among the group's members by the table's epoch."""

    table_id: int
    epoch: JobEpoch
    lake_version: int
    offsets: Mapping[int, int]
    job: str | None = None
    group: str | None = None
    table_epoch: TableEpoch | None = None


@dataclass(frozen=True)
class TableClaims:
    """A tiering group member's claim on tables: ``table_epochs`` by table id. A store that
    orders a group's members refuses a lease call carrying a lower table epoch than it has seen
    (``TableEpochFencedError``): the table moved to another member."""

    group: str
    job: str
    table_epochs: Mapping[int, TableEpoch]


@runtime_checkable
class StoreCatalog(Protocol):
    """What planning reads. Each call is one view of the store; none mutates it."""

    def tables(self) -> list[StoreTable]:
        """Every table the job may tier."""
        ...

    def table(self, name: str) -> StoreTable:
        """One table; ``TableNotFoundError`` naming it when the store does not hold it."""
        ...

    def log_ends(self, tables: Sequence[str] | None = None) -> dict[str, TableLog]:
        """Every bucket's log of each of ``tables`` (None: every table), by name, in one call; a
        name the store does not hold (dropped meanwhile) is absent. An ``end`` may move back after
        a store lost acked writes (an unclean restart): telling that from progress is the caller's."""
        ...

    def latest_snapshots(self, table: str) -> dict[int, SnapshotRef]:
        """The newest snapshot of each bucket that has one, by bucket (a bucket without one is
        absent). Its files may go at any time unless a lease holds it."""
        ...

    def snapshot_available(self, table: str, ref: SnapshotRef) -> bool:
        """Whether ``ref``'s files are still there (False once collected)."""
        ...


@runtime_checkable
class SnapshotLease(Protocol):
    """The job-scoped lease that keeps snapshots from the store's garbage collection.

    Every verb carries the term's ``epoch``; a lower epoch than the lease has seen is refused
    with ``FencedEpochError``. A store without epochs on its leases (Fluss) has them checked on
    this side, in the process that calls: a weaker fence, which the job's ZooKeeper epoch backs.
    A hold lasts ``duration_ms`` after the last acquire or renewal, then the store may collect.
    A store without the lease API raises ``LeaseUnsupportedError`` from any verb: the job then
    tiers without holds, after one warning."""

    def create(self, lease_id: str, epoch: JobEpoch, duration_ms: int) -> None:
        """Make the lease known, holding nothing (a no-op for a lease already there)."""
        ...

    def acquire(
        self,
        lease_id: str,
        epoch: JobEpoch,
        duration_ms: int,
        snapshots: Sequence[SnapshotRef],
        owners: TableClaims | None = None,
    ) -> list[SnapshotRef]:
        """Hold ``snapshots`` (one per bucket: a newer one replaces the bucket's hold) and renew the
        lease; returns the ones that are unavailable, their files already gone: plan those
        buckets from a newer snapshot. The others are held when this returns. ``owners``: a group
        member's claims on the snapshots' tables, refused by a store that keeps table epochs when
        one moved (``TableEpochFencedError``); a store that keeps none (Fluss) checks nothing."""
        ...

    def held(self, lease_id: str) -> list[BucketId] | None:
        """The buckets the lease holds now (empty: an unknown or lapsed lease); None: the store
        cannot list a lease's holds, and a caller that must let go of strays releases every
        bucket it does not need."""
        ...

    def renew(self, lease_id: str, epoch: JobEpoch, duration_ms: int) -> None:
        """Extend every hold by ``duration_ms`` from now. ``LeaseNotFoundError`` when the store
        says the lease lapsed or was dropped (a store that cannot tell renews nothing)."""
        ...

    def release(self, lease_id: str, epoch: JobEpoch, buckets: Sequence[BucketId]) -> None:
        """Let go of the holds on ``buckets``; a bucket not held is no error."""
        ...

    def drop(self, lease_id: str, epoch: JobEpoch) -> None:
        """Let go of every hold and forget the lease."""
        ...


@runtime_checkable
class LakeProgressReport(Protocol):
    """Where a store takes the lake's progress (its log GC may then follow the lake). What it
    holds reads back as :attr:`TableLog.reported` where the store keeps which job reported (the
    reference store); Fluss's lake snapshot names no job, so its report is never read back (a
    report there is for Fluss's side: ``reported`` stays None)."""

    def report(self, progress: Mapping[str, LakeProgress]) -> dict[str, StoreError | None]:
        """Store each table's ``progress`` (named by its ``job``), in one call: per table None
        (stored) or the error its own report would raise, returned (``TableNotFoundError`` for a
        dropped table, ``ConflictError`` ``OTHER_JOB`` when another job's report holds it,
        ``TableEpochFencedError`` when the table moved to another member of the group). A stale
        epoch raises ``FencedEpochError`` and stores none: the term is over."""
        ...


@runtime_checkable
class StoreFiles(Protocol):
    """Where a store keeps snapshots and changelog as Parquet files a round may read directly
    (whole files copied into the lake, row groups read by fragment), not only through a
    :class:`BucketReader`."""

    def snapshot_files(self, table: str, ref: SnapshotRef) -> list[str]:
        """The snapshot's files (URIs or local paths); ``SnapshotUnavailableError`` once collected."""
        ...

    def log_files(
        self, ranges: Mapping[str, Sequence[tuple[int, int, int]]]
    ) -> dict[str, list[list[str]] | StoreError]:
        """For each table, per ``(bucket, start, end)`` range in the order given, the files holding
        it, in one call; what the store cannot answer for a table is that table's error, returned
        (``SnapshotUnavailableError`` for a truncated log)."""
        ...


@runtime_checkable
class BucketReader(Protocol):
    """Reads one bucket, on an executor: picklable, holding no connection until it reads."""

    def snapshot_rows(self, table: StoreTable, ref: SnapshotRef) -> Iterator[pa.RecordBatch]:
        """The bucket's rows as of ``ref.log_offset``, with ``table.arrow_schema``'s columns.
        ``SnapshotUnavailableError`` when its files are gone."""
        ...

    def changelog(self, table: StoreTable, bucket: int, start: int, end: int) -> Iterator[pa.RecordBatch]:
        """The bucket's changes at offsets ``[start, end)``, in offset order, with
        :func:`changelog_schema`'s columns: ``+I`` inserts a key, ``+U`` replaces its row, ``-D``
        deletes it (the other columns may be null). ``SnapshotUnavailableError`` when part of the
        range is no longer readable (``start`` below the log's start)."""
        ...


@runtime_checkable
class PlanningStore(StoreCatalog, SnapshotLease, Protocol):
    """A store as the driver and the planning process see it."""

    @property
    def lake_progress(self) -> LakeProgressReport | None:
        """Where the lake's progress goes; None: the store takes none."""
        ...

    @property
    def files(self) -> StoreFiles | None:
        """The store's files, where a round may read them directly; None: only through
        :meth:`bucket_reader`."""
        ...

    def bucket_reader(self) -> BucketReader:
        """A reader of this store's buckets, to pickle into tasks."""
        ...

    def with_retry_deadline(self, seconds: float) -> PlanningStore:
        """The same store, an unavailable store's calls retried for at most ``seconds``: a round's
        per-table calls, so one table the store keeps refusing does not hold the round."""
        ...

    def close(self) -> None:
        """Let go of the connections this object made."""
        ...
