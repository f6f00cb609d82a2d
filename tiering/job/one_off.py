"""Terms of their own for one-off commands: `tiering maintain` and `tiering resync`.

Failure modes:
- another driver leads the job, or takes the lead first: refused (:class:`TieringError`)
  before anything is written; the leader maintains the tables itself, and two terms never act
  at once. A term of its own has a larger epoch than any before, so its commits fence every
  earlier term;
- a job in a tiering group: refused (:class:`UsageError`), since its lake commits are ordered by
  table epochs, which a term of the job's does not hold;
- a lake table that no round can repair (deleted or changed by hand, another writer's rows, a
  schema it cannot follow): :func:`resync_as_leader` rebuilds it from the store as a term of its
  own, its snapshots held by a renewed lease of its own, dropped at the end (one the store
  refuses lapses); the next term continues from it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from tiering.conf.model import TieringConfig
from tiering.context import planning_store
from tiering.delta_log.lake import Lake
from tiering.errors import CoordinationError, TableNotFoundError, TieringError, UsageError
from tiering.job.leader import lead
from tiering.job.spark_session import build_spark
from tiering.job.tables import included_tables
from tiering.kvstore.contract import PlanningStore, SnapshotRef, StoreTable
from tiering.lease.job_lease import JobLease, LeaseRenewer
from tiering.round.committer import other_job
from tiering.writers.maintenance import LakeMaintainer, MaintenancePass

if TYPE_CHECKING:
    from tiering.coord.leader import LeaderTerm
    from tiering.round.resync import TableResync

__all__ = ["maintain_as_leader", "resync_as_leader"]

log = logging.getLogger(__name__)


def maintain_as_leader(config: TieringConfig, *, wait_s: float = 5.0) -> MaintenancePass:
    """One maintenance pass over the job's tables as a term of its own: a larger epoch than any
    before, so its commits fence every earlier term. Refused (:class:`TieringError`) while another
    driver leads the job: that leader maintains the tables itself, and two terms never act at once."""
    _outside_a_group(config, "maintain")
    busy = (
        f"its leader maintains the lake every {config.maintenance.every_rounds} rounds; "
        "stop it to run `tiering maintain` by hand"
    )
    lake = Lake.of(config.lake)
    term = _term_of_its_own(config, lake, "maintain", busy, wait_s)
    try:
        store = planning_store(config)
        try:
            tables = included_tables(config, store)
        finally:
            store.close()
        # a maintainer of its own knows no history: its pass covers every table
        return LakeMaintainer(
            lake,
            config.job.name,
            config.maintenance,
            term.epoch,
            check_term=term.check,
            parallelism=config.lake.table_parallelism,
        ).run(tables)
    finally:
        term.resign()


def _outside_a_group(config: TieringConfig, command: str) -> None:
    """A term of its own commits under the job's name and epoch, which a tiering group's table
    epochs do not order: refused in a group (UsageError naming it)."""
    if config.job.group is not None:
        raise UsageError(
            f"`tiering {command}` of job {config.job.name!r}: the job is in tiering group {config.job.group!r}, whose "
            "lake commits are ordered by table epochs, not by the job's epoch; not available in a group yet"
        )


def resync_as_leader(config: TieringConfig, table: str, *, wait_s: float = 5.0) -> TableResync:
    """Rebuild ``table``'s lake copy from a fresh snapshot of every bucket, in one commit of a
    term of its own (:mod:`tiering.round.resync`); the job's next term continues from it. A table
    the store does not have or the job does not tier is a :class:`UsageError`, one another job
    tiers (its lake report is that job's) a ``ConflictError`` naming it, a driver leading the
    job a :class:`TieringError`: all before anything is written. The store is reached through
    the seam (the reference store or Fluss), its connections closed at the end."""
    from tiering.round.resync import resync_table
    from tiering.state.lease_file import new_lease_id
    from tiering.writers.choice import make_round_writer

    _outside_a_group(config, "resync")
    job = config.job.name
    if not config.tables.selects(table):
        raise UsageError(f"job {job!r} does not tier table {table!r} ([tables] include/exclude): nothing to resync")
    store = planning_store(config)
    try:
        try:
            described = store.table(table)
        except TableNotFoundError as e:
            raise UsageError(f"table {table!r} is not in the store at {config.kvstore.where}: nothing to resync") from e
        reported = store.log_ends([table]).get(table)
        holder = reported.reported.job if reported is not None and reported.reported is not None else None
        if holder not in (None, job):
            raise other_job(table, job, holder)
        lake = Lake.of(config.lake)
        term = _term_of_its_own(config, lake, "resync", "stop it to run `tiering resync`, then start it again", wait_s)
        try:
            # Spark first: a Fluss store then reaches Fluss's Java client in the driver's JVM
            writer = make_round_writer(build_spark(config), config.lake, job, lake)
            lease = JobLease(store, new_lease_id(job), term.epoch, int(config.lease.duration_s * 1000))
            lease.claim()
            renewer = LeaseRenewer(lease)

            def check_term() -> None:
                term.check()
                renewer.check()

            try:
                with renewer:  # the snapshots stay held however long the rebuild takes
                    snapshots = _fresh_snapshots(store, described)
                    return resync_table(described, snapshots, writer, lake, store, lease, check_term=check_term)
            finally:
                _drop_quietly(lease)
        finally:
            term.resign()
    finally:
        store.close()


def _fresh_snapshots(store: PlanningStore, table: StoreTable) -> dict[int, SnapshotRef]:
    """The freshest snapshot of each bucket: the reference store takes them on demand; Fluss
    snapshots each changed bucket on its own schedule (``kv.snapshot.interval``), so its latest,
    and the log after them brings the copy to the log end."""
    from tiering.kvstore.reference import ReferenceStore

    if not isinstance(store, ReferenceStore):
        return store.latest_snapshots(table.name)
    taken = store.client.take_snapshots(table.name)
    return {
        s.bucket: SnapshotRef(taken.table_id, s.bucket, s.snapshot_id, s.log_offset, s.row_count, s.size_bytes)
        for s in taken.buckets
    }


def _drop_quietly(lease: JobLease) -> None:
    """Drop a one-off command's lease; one the store refuses lapses after its duration (the
    command's own error, if any, is the one that matters)."""
    try:
        lease.drop()
    except TieringError as e:
        log.warning("lease %s not dropped (it lapses after %d ms): %s", lease.lease_id, lease.duration_ms, e)


def _term_of_its_own(config: TieringConfig, lake: Lake, command: str, busy: str, wait_s: float) -> LeaderTerm:
    """A term for a one-off command (`tiering maintain`, `tiering resync`) that writes to ``lake``:
    a larger epoch than any before, so its commits fence every earlier term. Refused
    (:class:`TieringError`) while a driver leads the job (``busy`` says what to do), or when one
    takes the lead first; a lake root that cannot be used before either."""
    from tiering.coord.leader import read_status

    lake.store.check()
    job = config.job.name
    leader = read_status(config.zookeeper.hosts, job).leader
    if leader is not None:
        raise TieringError(f"job {job!r} is led by {leader} right now: {busy}")
    try:
        return lead(config, timeout_s=wait_s, role=command)
    except CoordinationError as e:
        raise TieringError(f"job {job!r}: `tiering {command}` refused, another driver took the lead: {e}") from e
