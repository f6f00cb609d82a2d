"""What a round does to each bucket of one table, decided before any data moves (pure Python).

Failure modes this guards against: losing changes (a log split that starts above what the
bucket's base already holds is a gap: refused, naming the bucket and both offsets);
re-applying changes the base already holds (trimmed: the changes read for a bucket start
exactly at its base's offset); mixing inputs of another table or incarnation (refused);
a log split without segment files (refused, naming the split; a snapshot of an empty bucket
may have none). Overlapping log splits are fine.

A bucket's store input is files a task opens (the reference store's Parquet: a bare snapshot is
then a byte copy), or, for a store without such files (Apache Fluss), reads through the store's
:class:`~tiering.kvstore.contract.BucketReader`, which the plan carries to the task: the snapshot's
rows and the changelog ``[log_from, log_to)``, read where the task runs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from tiering.delta_log.lake import LakeFile
from tiering.enumerator.positions import LakePosition
from tiering.enumerator.splits import LogSplit, SnapshotSplit, Split
from tiering.errors import LakeCommitError
from tiering.kvstore.contract import BucketReader, StoreTable

__all__ = ["BucketBase", "BucketPlan", "plan_buckets", "heavy"]

#: A rewrite is heavy from this many changes or this many bytes of lake files on (:func:`heavy`).
HEAVY_CHANGES = 10_000
HEAVY_BYTES = 8 * 1024 * 1024


class BucketBase(StrEnum):
    """Where a bucket's rows before the round come from (:attr:`BucketPlan.base_files`)."""

    #: a snapshot's files: a bootstrap, or a table the round replaces; the round replaces the bucket
    SNAPSHOT = "snapshot"
    #: the bucket's current Delta files: a changelog round on a bucket already tiered
    LAKE = "lake"
    #: nothing: a bucket never tiered and without a snapshot
    EMPTY = "empty"


@dataclass(frozen=True)
class BucketPlan:
    """One bucket's new content: its base rows with the changes ``[log_from, log_to)`` applied.

    ``base`` says what ``base_files`` are (:class:`BucketBase`). ``log_from`` is the
    base's exclusive end, so nothing below it is re-applied; ``position`` is the bucket's
    exclusive offset after the round.

    ``lake_files`` are the bucket's files in the lake before the round, with their key ranges.
    On a lake base they make the rewrite one by file (:attr:`by_file`): only the files whose
    range could hold a changed key are rewritten, and the commit removes exactly those. Without
    them the whole base is rewritten and the commit replaces the whole bucket; on another base
    the commit removes them all (a bootstrap replaces the bucket).
    """

    bucket: int
    base: BucketBase
    base_files: tuple[str, ...]
    log_files: tuple[str, ...]
    log_from: int
    log_to: int
    snapshot_id: int | None = None
    lake_files: tuple[LakeFile, ...] = ()
    #: the store's reader of the bucket's snapshot and changes, when they are not files (None: the
    #: files above); picklable, it connects where the task runs
    reader: BucketReader | None = None

    @property
    def by_file(self) -> bool:
        """Whether only the files that could hold a changed key are rewritten."""
        return self.base is BucketBase.LAKE and bool(self.lake_files)

    @property
    def position(self) -> int:
        return max(self.log_from, self.log_to)

    @property
    def has_changes(self) -> bool:
        return self.log_to > self.log_from

    @property
    def num_changes(self) -> int:
        """At most this many changes in the bucket's range: offsets increase by at least one per
        change, not by exactly one (Fluss's log holds ``-U`` records a read drops). An upper
        bound, so a rewrite is never taken for lighter than it is."""
        return max(0, self.log_to - self.log_from)

    @property
    def lake_bytes(self) -> int:
        """Bytes of the bucket's files in the lake before the round."""
        return sum(f.size for f in self.lake_files)

    @property
    def bare_snapshot(self) -> bool:
        """A snapshot's files with no change on top: a byte copy when they have the lake's columns
        (a snapshot read through a reader is rows to write)."""
        return self.base is BucketBase.SNAPSHOT and not self.has_changes and self.reader is None

    @property
    def rewrites(self) -> bool:
        """False when the bucket's lake content would not change (all its changes are there)."""
        return self.base is BucketBase.SNAPSHOT or self.has_changes


def heavy(plans: Sequence[BucketPlan]) -> bool:
    """Whether rewriting ``plans`` together may hold many rows in memory: a snapshot's (the plan
    does not know its size), or at least :data:`HEAVY_CHANGES` changes or :data:`HEAVY_BYTES` of
    lake files. The one measure of a rewrite's weight, and it decides both ways it matters: a
    heavy rewrite is worth threads (its CPU outweighs theirs; the driver's buckets,
    :mod:`tiering.writers.delta_rs_writer`) and is one to hold memory for (an executor runs one at a
    time, :mod:`tiering.writers.buckets.schedule`); a light one costs less than a thread and little
    memory."""
    return (
        any(p.base is BucketBase.SNAPSHOT for p in plans)
        or sum(p.num_changes for p in plans) >= HEAVY_CHANGES
        or sum(p.lake_bytes for p in plans) >= HEAVY_BYTES
    )


def plan_buckets(
    table: StoreTable,
    splits: Sequence[Split],
    files: Mapping[Split, Sequence[str]],
    lake: LakePosition | None,
    lake_files: Mapping[int, Sequence[LakeFile]],
    reader: BucketReader | None = None,
) -> list[BucketPlan]:
    """One plan per bucket the splits touch, ordered by bucket.

    ``lake`` is the table's position before the round (None: nothing of this ``table_id``
    tiered, e.g. a replaced table); ``lake_files`` its current Delta files per bucket (none for
    a table the round replaces). With ``reader``, the splits are read through it and ``files``
    may name none.
    """
    snapshots: dict[int, SnapshotSplit] = {}
    logs: dict[int, list[LogSplit]] = defaultdict(list)
    for split in splits:
        _check_split(table, split, files if reader is None else None)
        if isinstance(split, SnapshotSplit):
            if split.bucket in snapshots:
                raise LakeCommitError(
                    f"table {table.name!r} bucket {split.bucket}: two snapshot splits in one round "
                    f"({snapshots[split.bucket].snapshot_id} and {split.snapshot_id})",
                    table=table.name,
                )
            snapshots[split.bucket] = split
        else:
            logs[split.bucket].append(split)
    plans = []
    for bucket in sorted(set(snapshots) | set(logs)):
        plan = _plan_bucket(table, bucket, snapshots.get(bucket), sorted(logs[bucket]), files, lake, lake_files)
        plans.append(plan if reader is None else replace(plan, reader=reader))
    return plans


def _plan_bucket(
    table: StoreTable,
    bucket: int,
    snapshot: SnapshotSplit | None,
    logs: list[LogSplit],
    files: Mapping[Split, Sequence[str]],
    lake: LakePosition | None,
    lake_files: Mapping[int, Sequence[LakeFile]],
) -> BucketPlan:
    current = tuple(lake_files.get(bucket, ()))
    if snapshot is not None:
        base, base_files, start = BucketBase.SNAPSHOT, tuple(files.get(snapshot, ())), snapshot.log_offset
    elif lake is not None and bucket in lake.buckets:
        base, base_files, start = BucketBase.LAKE, tuple(f.uri for f in current), lake.buckets[bucket]
    else:
        base, base_files, start = BucketBase.EMPTY, (), 0
    reached = start
    log_files: list[str] = []
    for log in logs:
        if log.start_offset > reached:
            raise LakeCommitError(
                f"table {table.name!r} bucket {bucket}: log split starts at offset {log.start_offset} "
                f"but the bucket's {base} base holds only up to {reached}; the changes between would be lost",
                table=table.name,
            )
        if log.end_offset > reached:
            reached = log.end_offset
            log_files += [f for f in files.get(log, ()) if f not in log_files]
    return BucketPlan(
        bucket=bucket,
        base=base,
        base_files=base_files,
        log_files=tuple(log_files),
        log_from=start,
        log_to=reached,
        snapshot_id=snapshot.snapshot_id if snapshot is not None else None,
        lake_files=current,
    )


def _check_split(table: StoreTable, split: Split, files: Mapping[Split, Sequence[str]] | None) -> None:
    """``split`` is of ``table``; with ``files`` (None: read through the store's reader), they
    name the split's, and a log split's are not none."""
    if split.table != table.name or split.table_id != table.table_id:
        raise LakeCommitError(
            f"split {split} does not belong to table {table.name!r} (table_id {table.table_id})",
            table=table.name,
        )
    if not 0 <= split.bucket < table.num_buckets:
        raise LakeCommitError(
            f"split {split}: bucket {split.bucket} is outside table {table.name!r}'s {table.num_buckets} buckets",
            table=table.name,
        )
    if files is None:
        return
    if split not in files:
        raise LakeCommitError(f"table {table.name!r}: no files given for split {split}", table=table.name)
    if isinstance(split, LogSplit) and not files[split]:
        # a non-empty offset range always has a segment; none means the changes are gone
        raise LakeCommitError(f"table {table.name!r}: log split {split} has no segment files", table=table.name)
