"""Rebuilding one table's lake copy from the store (`tiering resync`).

Failure modes it repairs, which no round can: a lake table damaged or deleted by hand, one
another writer changed rows of (:class:`~tiering.errors.ForeignCommitError`), one whose Delta
schema cannot follow the KV table any more (:class:`~tiering.errors.SchemaMismatchError`, after
a hand-made change). A resync is one round of its own, in a term of its own: the store takes a
fresh snapshot of every bucket, the round bootstraps every bucket from it (snapshot split plus
the log after it), written as a round's table is (:meth:`RoundWriter.write_table_round`), and its
one commit replaces every file and the schema of the table (``replace_table``, as for a
re-created table). That commit is a round commit like any other:
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
from collections.abc import Callable
from dataclasses import dataclass

from tiering.delta_log.lake import Lake
from tiering.enumerator.planner import RoundPlan, RoundPlanner, TableInput
from tiering.enumerator.splits import LogSplit, SnapshotSplit, Split
from tiering.errors import NotLeaderError, SnapshotUnavailableError, StoreError, TableRecreatedError, TieringError
from tiering.kvstore.client import KvStoreClient
from tiering.kvstore.contract import SnapshotRef, StoreTable
from tiering.kvstore.models import LakeReport, LogRange, Snapshot
from tiering.kvstore.reference import bucket_log
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
    """What a resync did: the commit that replaced the table, and the snapshots it read."""

    commit: TableCommit
    snapshots: dict[int, int]
    reported: bool

    def __str__(self) -> str:
        report = "" if self.reported else "; the store's lake report waits for the job's next commit"
        return f"resynced from snapshots {self.snapshots}: {self.commit}{report}"


def resync_table(
    table: StoreTable,
    writer: RoundWriter,
    lake: Lake,
    client: KvStoreClient,
    lease: JobLease,
    *,
    check_term: Callable[[], None],
) -> TableResync:
    """Replace ``table``'s lake copy with a fresh snapshot of every bucket and the log after it,
    in one commit of term ``lease.epoch``; ``check_term`` raises :class:`NotLeaderError` once that
    term is over. ``client``: the reference store's, which snapshots the table on demand. The lake
    report names the job, as the job's rounds do (the writer's id: a resync is refused in a
    group, so it is the job's name): the store refuses it when another job's report holds the
    table. The lease's snapshots are the caller's to drop."""
    snapshots = client.take_snapshots(table.name)
    logs = client.log_info(table.name)
    if {snapshots.table_id, logs.table_id} != {table.table_id}:
        raise TableRecreatedError(f"table {table.name!r} was re-created during its resync", table=table.name)
    refs = [
        SnapshotRef(table.table_id, s.bucket, s.snapshot_id, s.log_offset, s.row_count, s.size_bytes)
        for s in snapshots.buckets
    ]
    plan = _bootstrap_plan(TableInput(table, refs, [bucket_log(b) for b in logs.buckets]))
    gone = lease.acquire(plan.snapshot_refs())
    if gone:
        raise SnapshotUnavailableError(
            f"table {table.name!r}: snapshots collected before they were leased: {gone}; run the resync again",
            table=table.name,
        )
    splits = list(plan.splits)
    files = _files(client, table, splits, {s.bucket: s for s in snapshots.buckets})
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
    )
    if commit.skipped:  # nothing was written
        raise ResyncError(f"table {table.name!r}: the store holds nothing to resync from", table=table.name)
    taken = {s.bucket: s.snapshot_id for s in splits if isinstance(s, SnapshotSplit)}
    log.info("resync table=%s epoch=%d: %s", table.name, lease.epoch, commit)
    return TableResync(commit, taken, _report(client, table, writer.writer_id, lease.epoch, commit))


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


def _files(
    client: KvStoreClient, table: StoreTable, splits: list[Split], snapshots: dict[int, Snapshot]
) -> dict[Split, list[str]]:
    """Every split's Parquet files: the snapshots' from the snapshot answer, the log's segments
    in one call."""
    files: dict[Split, list[str]] = {s: list(snapshots[s.bucket].files) for s in splits if isinstance(s, SnapshotSplit)}
    logs = [s for s in splits if isinstance(s, LogSplit)]
    if logs:
        ranges = [LogRange(bucket=s.bucket, from_offset=s.start_offset, to_offset=s.end_offset) for s in logs]
        for split, segments in zip(logs, client.table_segments(table.name, ranges), strict=False):
            files[split] = [segment.file for segment in segments]
    return files


def _report(client: KvStoreClient, table: StoreTable, job: str, epoch: int, commit: TableCommit) -> bool:
    """The new lake offsets to the store; one it refuses is left to the job's next round (the
    commit has landed: the store's report only bounds its log's garbage collection)."""
    buckets = {str(b): offset for b, offset in sorted(commit.positions.items())}
    try:
        client.report_lake(
            table.name,
            LakeReport(
                table_id=table.table_id, epoch=epoch, lake_version=commit.delta_version, buckets=buckets, job=job
            ),
        )
    except NotLeaderError:
        raise
    except StoreError as e:
        log.warning(
            "resync table=%s: committed at Delta version %d, its lake report refused: %s",
            table.name,
            commit.delta_version,
            e,
        )
        return False
    return True
