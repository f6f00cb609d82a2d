"""The round planner: which splits to read this round, from where the lake stands (docs/DESIGN.md §5).

Failure modes it exists for: re-reading or skipping changelog offsets (the plan starts every
bucket exactly at the lake's exclusive offset), mixing two incarnations of a re-created table
(positions count only for the same ``table_id``), silently losing changes when the log was
truncated past the lake (re-bootstrap from a snapshot, or :class:`DataLossError` when
``fail_on_data_loss``), and starving buckets under read limits (rotation, below).

The planner is pure: no I/O, no clock, no randomness. Equal input gives an equal plan, which
is what lets Spark replay a batch from its checkpointed offset.

Per bucket (``p`` = the lake's offset for this table id, if any):

- never tiered, a snapshot exists -> snapshot split + log split ``[snap.log_offset, log_end)``;
- never tiered, no snapshot, ``log_start == 0`` -> log split ``[0, log_end)``;
- never tiered, no snapshot, ``log_start > 0`` -> skipped until a snapshot exists;
- tiered, ``log_start <= p`` -> log split ``[p, log_end)``;
- tiered, ``log_start > p`` -> re-bootstrap from the latest snapshot, or DataLossError.

A bootstrap needs the snapshot's ``log_offset >= log_start``, else the changes between the
snapshot and the log start are gone: the bucket is skipped until a newer snapshot exists.
Empty log ranges produce no split.

Read limits admit whole buckets (a bucket's snapshot and log split together) so a bucket is
never half-planned. Fairness: the stable bucket order ``(table, bucket)`` is rotated by the
round number, so with a stable set of lagging buckets each one is admitted at least once in
any ``n`` consecutive rounds. (Most-lagging-first was rejected: a bucket that always lags a
little less than a hot one would wait forever.) The first bucket is always admitted, even
over the limits, so every round makes progress.

Byte estimate of a bucket: its snapshot's ``size_bytes`` plus, for the log range, the record
count (its offsets: an upper bound where they have gaps) times the table's average row size (sum
of ``size_bytes`` / sum of ``row_count`` over the snapshots whose store gives both), or
``default_record_bytes`` when none does (Fluss gives neither). A snapshot of unknown size counts
as its ``row_count``, else its ``log_offset`` (the changes it covers: no fewer than its rows),
times that row size. Log records also carry deletes and system columns, so this is an estimate to
bound a round, not an accounting.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from tiering.enumerator.positions import BucketPosition, LakePosition
from tiering.enumerator.splits import LogSplit, SnapshotSplit, Split, sort_key
from tiering.errors import DataLossError
from tiering.kvstore.contract import BucketLog, SnapshotRef, StoreTable

__all__ = [
    "TableInput",
    "needs_bootstrap",
    "SkippedBucket",
    "TablePlan",
    "RoundPlan",
    "RoundPlanner",
    "WAIT_FOR_SNAPSHOT",
    "SNAPSHOT_BEHIND_LOG_START",
    "SNAPSHOT_UNAVAILABLE",
    "LAKE_AHEAD_OF_LOG",
]

# Why a bucket with work to do got no split this round (SkippedBucket.reason).
WAIT_FOR_SNAPSHOT = "wait_for_snapshot"  # log does not start at the needed offset, no snapshot yet
SNAPSHOT_BEHIND_LOG_START = "snapshot_behind_log_start"  # latest snapshot predates the log start
SNAPSHOT_UNAVAILABLE = "snapshot_unavailable"  # the lease could not hold it (files gone)
LAKE_AHEAD_OF_LOG = "lake_ahead_of_log"  # the store's log ends before the lake: store rolled back?

DEFAULT_RECORD_BYTES = 128


@dataclass(frozen=True)
class TableInput:
    """What the planner needs to know about one table, as the store and the lake report it:
    ``snapshots`` the latest of each bucket that has one (another ``table_id``'s are left out),
    ``logs`` every bucket's."""

    info: StoreTable
    snapshots: Sequence[SnapshotRef]
    logs: Sequence[BucketLog]
    lake: LakePosition | None = None


@dataclass(frozen=True)
class SkippedBucket:
    """A bucket with changes to tier that got no split this round, and why."""

    table: str
    bucket: int
    reason: str


@dataclass(frozen=True)
class TablePlan:
    """One table after the round.

    ``positions`` holds every bucket tiered once the round commits (cumulative: buckets with
    nothing new keep the lake's offset). ``lake`` is the lake's offsets before the round for
    this ``table_id`` (empty when never tiered or re-created). ``replace_table`` tells the
    writer that the lake holds another incarnation of the table: replace all of it.
    """

    table: str
    table_id: int
    positions: Mapping[int, BucketPosition] = field(hash=False)
    lake: Mapping[int, int] = field(hash=False)
    replace_table: bool = False


@dataclass(frozen=True)
class RoundPlan:
    """A round: its splits in stable order, the tables' positions after it, what waits.

    ``deferred`` are the ``(table, bucket)`` pairs held back by the read limits.
    """

    round: int
    splits: tuple[Split, ...]
    tables: tuple[TablePlan, ...]
    skipped: tuple[SkippedBucket, ...] = ()
    deferred: tuple[tuple[str, int], ...] = ()

    def table(self, name: str) -> TablePlan | None:
        return next((t for t in self.tables if t.table == name), None)

    def snapshot_refs(self) -> list[SnapshotRef]:
        """The snapshots the job lease must hold before this plan is handed out."""
        return [s.ref for s in self.splits if isinstance(s, SnapshotSplit)]

    def snapshot_tables(self) -> dict[int, str]:
        """The tables whose snapshots this plan holds (table_id -> name): what a group member's
        lease acquire claims."""
        return {s.table_id: s.table for s in self.splits if isinstance(s, SnapshotSplit)}

    def without_buckets(self, refs: Iterable[SnapshotRef]) -> RoundPlan:
        """Drop the buckets whose snapshot the lease could not hold.

        Their splits go, their position falls back to the lake's (or disappears when never
        tiered), and they are re-planned next round from a newer snapshot.
        """
        gone = {(r.table_id, r.bucket, r.snapshot_id) for r in refs}
        dropped = {
            (s.table, s.bucket)
            for s in self.splits
            if isinstance(s, SnapshotSplit) and (s.table_id, s.bucket, s.snapshot_id) in gone
        }
        if not dropped:
            return self
        tables = []
        for t in self.tables:
            positions = dict(t.positions)
            for table, bucket in dropped:
                if table != t.table:
                    continue
                if bucket in t.lake:
                    positions[bucket] = BucketPosition(t.lake[bucket], None)
                else:
                    positions.pop(bucket, None)
            if positions:
                tables.append(replace(t, positions=positions))
        skipped = self.skipped + tuple(SkippedBucket(t, b, SNAPSHOT_UNAVAILABLE) for t, b in sorted(dropped))
        return replace(
            self,
            splits=tuple(s for s in self.splits if (s.table, s.bucket) not in dropped),
            tables=tuple(tables),
            skipped=tuple(sorted(skipped, key=lambda s: (s.table, s.bucket))),
        )


@dataclass(frozen=True)
class _Work:
    """One bucket's share of a round: admitted or deferred as a whole."""

    table: str
    bucket: int
    splits: tuple[Split, ...]
    position: BucketPosition
    est_bytes: float


class RoundPlanner:
    """Plans rounds from the store's view (snapshots, log ranges) and the lake's positions.

    ``max_splits`` / ``max_bytes`` bound a round (0 = no limit); ``fail_on_data_loss`` turns
    a log truncated past the lake into :class:`DataLossError` instead of a re-bootstrap.
    """

    def __init__(
        self,
        *,
        max_splits: int = 0,
        max_bytes: int = 0,
        fail_on_data_loss: bool = False,
        default_record_bytes: int = DEFAULT_RECORD_BYTES,
    ) -> None:
        for name, value in (("max_splits", max_splits), ("max_bytes", max_bytes)):
            if value < 0:
                raise ValueError(f"{name} must be >= 0 (0 = no limit), got {value}")
        if default_record_bytes <= 0:
            raise ValueError(f"default_record_bytes must be > 0, got {default_record_bytes}")
        self.max_splits = max_splits
        self.max_bytes = max_bytes
        self.fail_on_data_loss = fail_on_data_loss
        self.default_record_bytes = default_record_bytes

    def plan(self, round: int, tables: Sequence[TableInput]) -> RoundPlan:
        if round < 0:
            raise ValueError(f"round must be >= 0, got {round}")
        names = [t.info.name for t in tables]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate table names in planner input: {sorted(names)}")
        ordered = sorted(tables, key=lambda t: t.info.name)

        work: list[_Work] = []
        skipped: list[SkippedBucket] = []
        for table in ordered:
            table_work, table_skipped = self._plan_table(table)
            work += table_work
            skipped += table_skipped
        admitted, deferred = self._admit(round, work)

        admitted_by_table: dict[str, list[_Work]] = {}
        for w in admitted:
            admitted_by_table.setdefault(w.table, []).append(w)
        table_plans = []
        for table in ordered:
            plan = self._table_plan(table, admitted_by_table.get(table.info.name, []))
            if plan.positions:
                table_plans.append(plan)
        return RoundPlan(
            round=round,
            splits=tuple(sorted((s for w in admitted for s in w.splits), key=sort_key)),
            tables=tuple(table_plans),
            skipped=tuple(skipped),
            deferred=tuple(sorted((w.table, w.bucket) for w in deferred)),
        )

    def _plan_table(self, table: TableInput) -> tuple[list[_Work], list[SkippedBucket]]:
        info = table.info
        logs = _logs_by_bucket(info, table.logs)
        snapshots = _latest_snapshots(info, table.snapshots)
        lake = _same_incarnation(info, table.lake)
        record_bytes = self._record_bytes(snapshots.values())
        work: list[_Work] = []
        skipped: list[SkippedBucket] = []
        for bucket in range(info.num_buckets):
            log = logs[bucket]
            p = lake.get(bucket)
            if p is not None and log.start <= p:
                if p < log.end:
                    split = LogSplit(info.name, bucket, info.table_id, p, log.end)
                    est = (log.end - p) * record_bytes
                    work.append(_Work(info.name, bucket, (split,), BucketPosition(log.end, None), est))
                elif p > log.end:
                    skipped.append(SkippedBucket(info.name, bucket, LAKE_AHEAD_OF_LOG))
                continue
            if p is not None and self.fail_on_data_loss:
                raise DataLossError(
                    f"table {info.name!r} (table_id {info.table_id}) bucket {bucket}: the lake is at "
                    f"offset {p} but the changelog now starts at {log.start}; changes "
                    f"[{p}, {log.start}) are lost (fail-on-data-loss is set)",
                    table=info.name,
                )
            snap = snapshots.get(bucket)
            if snap is None and p is None and log.start == 0:
                if log.end > 0:
                    split = LogSplit(info.name, bucket, info.table_id, 0, log.end)
                    est = log.end * record_bytes
                    work.append(_Work(info.name, bucket, (split,), BucketPosition(log.end, None), est))
                continue
            if snap is None:
                skipped.append(SkippedBucket(info.name, bucket, WAIT_FOR_SNAPSHOT))
                continue
            if snap.log_offset < log.start:
                skipped.append(SkippedBucket(info.name, bucket, SNAPSHOT_BEHIND_LOG_START))
                continue
            work.append(self._bootstrap(info, snap, log, record_bytes))
        return work, skipped

    @staticmethod
    def _bootstrap(info: StoreTable, snap: SnapshotRef, log: BucketLog, record_bytes: float) -> _Work:
        splits: list[Split] = [SnapshotSplit(info.name, snap.bucket, info.table_id, snap.snapshot_id, snap.log_offset)]
        est = _snapshot_bytes(snap, record_bytes)
        if log.end > snap.log_offset:
            splits.append(LogSplit(info.name, snap.bucket, info.table_id, snap.log_offset, log.end))
            est += (log.end - snap.log_offset) * record_bytes
        end = max(snap.log_offset, log.end)
        return _Work(info.name, snap.bucket, tuple(splits), BucketPosition(end, snap.snapshot_id), math.ceil(est))

    def _record_bytes(self, snapshots: Iterable[SnapshotRef]) -> float:
        """The table's average row size, from the snapshots whose store gives both their rows and
        their bytes; ``default_record_bytes`` when none does."""
        sized = [(s.row_count, s.size_bytes) for s in snapshots if s.row_count is not None and s.size_bytes is not None]
        rows = sum(r for r, _ in sized)
        if rows <= 0:
            return self.default_record_bytes
        return sum(b for _, b in sized) / rows

    def _admit(self, round: int, work: list[_Work]) -> tuple[list[_Work], list[_Work]]:
        if not work:
            return [], []
        start = round % len(work)
        rotated = work[start:] + work[:start]
        splits, est = 0, 0.0
        admitted: list[_Work] = []
        for i, w in enumerate(rotated):
            over_splits = self.max_splits and splits + len(w.splits) > self.max_splits
            over_bytes = self.max_bytes and est + w.est_bytes > self.max_bytes
            if admitted and (over_splits or over_bytes):
                return admitted, rotated[i:]
            admitted.append(w)
            splits += len(w.splits)
            est += w.est_bytes
        return admitted, []

    @staticmethod
    def _table_plan(table: TableInput, admitted: list[_Work]) -> TablePlan:
        lake = _same_incarnation(table.info, table.lake)
        positions = {b: BucketPosition(p, None) for b, p in lake.items()}
        for w in admitted:
            positions[w.bucket] = w.position
        recreated = table.lake is not None and not table.lake.belongs_to(table.info.table_id)
        return TablePlan(
            table=table.info.name,
            table_id=table.info.table_id,
            positions=dict(sorted(positions.items())),
            lake=dict(lake),
            replace_table=recreated,
        )


def needs_bootstrap(info: StoreTable, logs: Iterable[BucketLog], lake: LakePosition | None) -> bool:
    """Whether a bucket of the table may be planned from a snapshot (never tiered by this
    incarnation, or its log truncated past the lake): only then does a plan read snapshots,
    besides estimating a round's bytes."""
    reached = _same_incarnation(info, lake)
    return any(b.bucket not in reached or b.start > reached[b.bucket] for b in logs)


def _same_incarnation(info: StoreTable, lake: LakePosition | None) -> Mapping[int, int]:
    """The lake's offsets if they belong to this table id; another id's offsets mean nothing."""
    if lake is None or not lake.belongs_to(info.table_id):
        return {}
    return {b: p for b, p in lake.buckets.items() if b < info.num_buckets}


def _logs_by_bucket(info: StoreTable, logs: Sequence[BucketLog]) -> dict[int, BucketLog]:
    by_bucket: dict[int, BucketLog] = {}
    for log in logs:
        if not 0 <= log.bucket < info.num_buckets:
            raise ValueError(
                f"table {info.name!r}: log range for bucket {log.bucket} outside 0..{info.num_buckets - 1}"
            )
        if log.bucket in by_bucket:
            raise ValueError(f"table {info.name!r}: two log ranges for bucket {log.bucket}")
        if not 0 <= log.start <= log.end:
            raise ValueError(
                f"table {info.name!r} bucket {log.bucket}: log range [{log.start}, {log.end}) is inverted or negative"
            )
        by_bucket[log.bucket] = log
    missing = [b for b in range(info.num_buckets) if b not in by_bucket]
    if missing:
        raise ValueError(f"table {info.name!r}: no log range for buckets {missing}")
    return by_bucket


def _snapshot_bytes(snap: SnapshotRef, record_bytes: float) -> float:
    """A snapshot's bytes as its store gives them, else its rows (or, not given either, the changes
    it covers) times the table's row size."""
    if snap.size_bytes is not None:
        return snap.size_bytes
    return (snap.row_count if snap.row_count is not None else snap.log_offset) * record_bytes


def _latest_snapshots(info: StoreTable, snapshots: Sequence[SnapshotRef]) -> dict[int, SnapshotRef]:
    """The newest snapshot of each bucket, of this incarnation only: a table re-created between
    the store's answers has its new id's snapshots left out, its next round planned afresh."""
    latest: dict[int, SnapshotRef] = {}
    for snap in snapshots:
        if snap.table_id != info.table_id:
            continue
        if not 0 <= snap.bucket < info.num_buckets:
            raise ValueError(
                f"table {info.name!r}: snapshot for bucket {snap.bucket} outside 0..{info.num_buckets - 1}"
            )
        if snap.bucket not in latest or snap.snapshot_id > latest[snap.bucket].snapshot_id:
            latest[snap.bucket] = snap
    return latest
