"""Rebuilding one table's lake copy from the store (`tiering resync`).

Failure modes it repairs, which no round can: a lake table damaged or deleted by hand, one
another writer changed rows of (:class:`~tiering.errors.ForeignCommitError`), one whose Delta
schema cannot follow the KV table any more (:class:`~tiering.errors.SchemaMismatchError`, after
a hand-made change). A resync is one round of its own, in a term of its own: the store takes a
fresh snapshot of every bucket, the round bootstraps every bucket from it (snapshot split plus
the log after it), written as a round's table is (:meth:`RoundWriter.write_table_round`), and its
one commit replaces every file and the schema of the table (``replace_table``, as for a
re-created table). The snapshots are the store's freshest: the reference store takes them on
demand, Fluss's are its latest (it snapshots each changed bucket on its own schedule), and the
log after them is read up to its end as a round reads it; the round reaches the store through
the seam alone (its files where it has any, else its bucket reader). That commit is a round
commit like any other:
the job's txn ``tiering/<job>/<table>`` at ``epoch << 32 | 0`` and the ``kvTiering`` offsets, so
the job's next term (a larger epoch) continues from the new position, a replayed round of an
older term trims to nothing, and the commits before it are no longer looked at for other
writers. With the change data feed on, the commit reads as every old row deleted and every row
inserted.

Failure modes of its own, each before anything is written unless said otherwise:
- a bucket the fresh snapshots cannot bootstrap (its log truncated past the snapshot):
  :class:`ResyncError` naming the buckets;
- a snapshot collected before it was leased: :class:`SnapshotUnavailableError` (run it again);
- the table re-created upstream meanwhile: :class:`TableRecreatedError`;
- the term lost (a newer leader): :class:`NotLeaderError` from the term check before the commit, or
  from the commit itself;
- a crash: nothing landed, or the one commit did. The snapshots are held under a lease of the
  resync's own (a fresh ``<job>-<hex>``, never the checkpoint's), renewed while it runs (a
  resync may outlast ``lease.duration_s``), dropped when it ends, else lapsing after it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tiering.delta_log.lake import Lake
from tiering.enumerator.planner import RoundPlan, RoundPlanner, TableInput
from tiering.enumerator.splits import LogSplit, SnapshotSplit, Split
from tiering.epochs import JobEpoch
from tiering.errors import (
    NotLeaderError,
    SnapshotUnavailableError,
    StoreError,
    TableNotFoundError,
    TableRecreatedError,
    TieringError,
)
from tiering.kvstore.contract import BucketReader, LakeProgress, PlanningStore, SnapshotRef, StoreFiles, StoreTable
from tiering.lease.job_lease import JobLease
from tiering.writers.round_writer import RoundWriter, TableCommit

__all__ = ["ResyncError", "TableResync", "resync_table"]

log = logging.getLogger(__name__)

#: The round id of a resync's commit: its txn version is ``epoch << 32``, below every round of
#: the job's next term and above every round of the terms before it.
RESYNC_ROUND = 0


class ResyncError(TieringError):
    """The store cannot give the table a full copy now (a bucket without a usable snapshot)."""


@dataclass(frozen=True)
class TableResync:
    """What a resync did: the commit that replaced the table, the snapshots it read, and whether
    the store took its lake report (None: a store that takes none, as Fluss)."""

    commit: TableCommit
    snapshots: dict[int, int]
    reported: bool | None

    def __str__(self) -> str:
        report = "; the store's lake report waits for the job's next commit" if self.reported is False else ""
        return f"resynced from snapshots {self.snapshots}: {self.commit}{report}"


def resync_table(
    table: StoreTable,
    snapshots: Mapping[int, SnapshotRef],
    writer: RoundWriter,
    lake: Lake,
    store: PlanningStore,
    lease: JobLease,
    *,
    check_term: Callable[[], None],
) -> TableResync:
    """Replace ``table``'s lake copy with ``snapshots`` (the store's freshest, one per bucket) and
    the log after them, in one commit of term ``lease.epoch``; ``check_term`` raises
    :class:`NotLeaderError` once that term is over. The lake report names the job, as the job's
    rounds do (the writer's id: a resync is refused in a group, so it is the job's name): the store
    refuses it when another job's report holds the table. The lease's snapshots are the caller's
    to drop."""
    logs = store.log_ends([table.name]).get(table.name)
    if logs is None:
        raise TableNotFoundError(f"table {table.name!r} was dropped during its resync", table=table.name)
    if {ref.table_id for ref in snapshots.values()} | {logs.table_id} != {table.table_id}:
        raise TableRecreatedError(f"table {table.name!r} was re-created during its resync", table=table.name)
    plan = _bootstrap_plan(TableInput(table, list(snapshots.values()), list(logs.buckets.values())))
    gone = lease.acquire(plan.snapshot_refs())
    if gone:
        raise SnapshotUnavailableError(
            f"table {table.name!r}: snapshots collected before they were leased: {gone}; run the resync again",
            table=table.name,
        )
    splits = list(plan.splits)
    files, reader = _sources(store, table, splits)
    commit = writer.write_table_round(
        table,
        splits,
        files,
        lake.load(table.name),
        before_commit=check_term,
        epoch=lease.epoch,
        round_id=RESYNC_ROUND,
        lease_id=lease.lease_id,
        replace_table=True,
        reader=reader,
    )
    if commit.skipped:  # nothing was written
        raise ResyncError(f"table {table.name!r}: the store holds nothing to resync from", table=table.name)
    taken = {s.bucket: s.snapshot_id for s in splits if isinstance(s, SnapshotSplit)}
    log.info("resync table=%s epoch=%d: %s", table.name, lease.epoch, commit)
    return TableResync(commit, taken, _report(store, table, writer.writer_id, lease.epoch, commit))


def _bootstrap_plan(table: TableInput) -> RoundPlan:
    """Every bucket from its fresh snapshot (and the log after it), as a never-tiered table's
    first round is planned; a bucket left out fails the resync."""
    plan = RoundPlanner().plan(RESYNC_ROUND, [table])
    if plan.skipped:
        reasons = ", ".join(f"bucket {s.bucket}: {s.reason}" for s in plan.skipped)
        raise ResyncError(
            f"table {table.info.name!r}: cannot bootstrap every bucket from the store's snapshots "
            f"({reasons}); nothing was written",
            table=table.info.name,
        )
    return plan


def _sources(
    store: PlanningStore, table: StoreTable, splits: list[Split]
) -> tuple[dict[Split, list[str]], BucketReader | None]:
    """What the round reads: every split's files where the store has files a round may read (the
    log's in one call), else none and the store's bucket reader."""
    if store.files is None:
        return {}, store.bucket_reader()
    return _files(store.files, table, splits), None


def _files(files: StoreFiles, table: StoreTable, splits: list[Split]) -> dict[Split, list[str]]:
    found: dict[Split, list[str]] = {
        s: files.snapshot_files(table.name, s.ref) for s in splits if isinstance(s, SnapshotSplit)
    }
    logs = [s for s in splits if isinstance(s, LogSplit)]
    if logs:
        answer = files.log_files({table.name: [(s.bucket, s.start_offset, s.end_offset) for s in logs]})[table.name]
        if isinstance(answer, StoreError):
            raise answer
        found.update(zip(logs, answer, strict=True))
    return found


def _report(store: PlanningStore, table: StoreTable, job: str, epoch: JobEpoch, commit: TableCommit) -> bool | None:
    """The new lake offsets to the store (None: it takes none); one it refuses is left to the
    job's next round (the commit has landed: the store's report only bounds its log's garbage
    collection)."""
    progress = store.lake_progress
    if progress is None:
        return None
    report = LakeProgress(table.table_id, epoch, commit.delta_version, dict(sorted(commit.positions.items())), job=job)
    try:
        error = progress.report({table.name: report}).get(table.name)
    except NotLeaderError:
        raise
    except StoreError as e:
        error = e
    if error is not None:
        log.warning(
            "resync table=%s: committed at Delta version %d, its lake report refused: %s",
            table.name,
            commit.delta_version,
            error,
        )
        return False
    return True
