"""The operator commands' writes: `tiering leases drop` and `tiering take-over`.

Failure modes this guards against: an operator's write under a running job. Dropping a lease while
a leader runs would let the store collect snapshots the leader is reading: :func:`drop_lease`
refuses unless no leader holds the job (or the operator forces it). Dropping another job's lake
report while that job tiers the table would have its next report take the table back:
:func:`take_over` refuses while the holder leads, and names the report it checked in the drop, so
a term of the holder that starts in between keeps its fresh report. Nothing here writes to the
lake, the checkpoint or ZooKeeper; each write is one store call.

Over Apache Fluss (:mod:`tiering.ops.fluss_leases`): a lease is dropped by id, Fluss telling
nothing of what it held; Fluss keeps no lake report, so the job holding a table is the one whose
round commit is the lake table's newest (its job and lease id are in it), and taking the table over
releases that lease's holds of the table, under the same refusal while that job leads.
"""

from __future__ import annotations

from dataclasses import dataclass

from tiering.conf.model import TieringConfig
from tiering.coord.leader import read_status
from tiering.errors import ConflictError, LeaseNotFoundError, TableNotFoundError, TieringError
from tiering.ops.status import checkpoint_lease_id, operator_client
from tiering.state.lease_file import job_of_lease

__all__ = ["DroppedLease", "HandOver", "drop_lease", "take_over"]


@dataclass(frozen=True)
class DroppedLease:
    """A lease just dropped: its epoch and how many snapshots it held then, each None where the
    store cannot tell (Fluss)."""

    lease_id: str
    epoch: int | None
    snapshots: int | None


@dataclass(frozen=True)
class HandOver:
    """A table taken over from ``holder``, as of the holder's lake version ``lake_version``: what was
    let go of, as the command says it (its lake report dropped, or over Fluss its lease's holds of
    the table released)."""

    holder: str
    lake_version: int
    what: str


def drop_lease(
    config: TieringConfig, lease_id: str | None = None, *, force: bool = False, timeout_s: float
) -> DroppedLease:
    """Drop ``lease_id`` (default: the one in the job's checkpoint) at the lease's own epoch.

    Refused while a driver leads the job, unless ``force``: that driver reads the snapshots the
    lease holds. Another job's lease is refused naming that job, unless ``force``, and even then
    while that job has a leader. Returns the lease as it was just before the drop.
    """
    job = config.job.name
    lease_id = lease_id or checkpoint_lease_id(config)
    if lease_id is None:
        raise TieringError(f"job {job!r}: no lease id in checkpoint {config.job.checkpoint!r}; name the lease to drop")
    owner = job_of_lease(lease_id)
    if owner != job:
        whose = f"job {owner!r}'s" if owner else "not a lease id of any job's"
        if not force:
            raise TieringError(
                f"lease {lease_id!r} is {whose}, not job {job!r}'s: refused (pass --force to drop "
                "it anyway, while its job has no leader)",
                lease_id=lease_id,
            )
        if owner is not None:
            _refuse_while_led(config, owner, lease_id, "it cannot be forced: stop that job first", timeout_s)
    elif not force:
        then = f"stop it first, or pass --force to drop lease {lease_id!r} under it"
        _refuse_while_led(config, job, lease_id, then, timeout_s)
    if config.kvstore.kind == "fluss":
        from tiering.ops.fluss_leases import drop_fluss_lease

        drop_fluss_lease(config, lease_id, timeout_s=timeout_s)
        return DroppedLease(lease_id, None, None)
    client = operator_client(config, timeout_s)
    try:
        lease = client.get_lease(lease_id)
        client.drop_lease(lease_id, lease.epoch)
    except LeaseNotFoundError:
        raise TieringError(
            f"lease {lease_id!r} does not exist in the store at {config.kvstore.url} (already dropped or expired)",
            lease_id=lease_id,
        ) from None
    return DroppedLease(lease_id, lease.epoch, len(lease.snapshots))


def _refuse_while_led(config: TieringConfig, job: str, lease_id: str, then: str, timeout_s: float) -> None:
    leader = read_status(config.zookeeper.hosts, job, timeout_s=timeout_s).leader
    if leader is not None:
        raise TieringError(f"job {job!r} is led by {leader} right now: {then}", lease_id=lease_id)


def take_over(config: TieringConfig, table: str, *, force: bool = False, timeout_s: float) -> HandOver | None:
    """Hand ``table`` over to this job: drop the lake report another job holds it by, so this job's
    next report holds it (docs/DESIGN.md §5). Returns what was let go of; None when no other job
    holds the table (nothing to drop). Over Fluss: :func:`_take_over_from_lake`.

    Refused while a driver leads the holding job, unless ``force``: that job may still tier the
    table, and its next report would take it back (exclude the table there, then force). The drop
    names the report checked, so a term of the holder that starts between the check and the drop
    keeps its fresh report: refused, naming it.
    """
    if config.kvstore.kind == "fluss":
        return _take_over_from_lake(config, table, force=force, timeout_s=timeout_s)
    client = operator_client(config, timeout_s)
    try:
        report = client.get_lake(table)
    except TableNotFoundError:
        raise TieringError(
            f"table {table!r} does not exist in the store at {config.kvstore.url}", table=table
        ) from None
    holder = report.job if report is not None else None
    if report is None or holder is None or holder == config.job.name:
        return None
    if not force:
        _refuse_while_holder_leads(config, table, holder, timeout_s)
    try:
        dropped = client.drop_lake(table, report)
        return HandOver(holder, dropped.lake_version, f"lake report (Delta version {dropped.lake_version}) dropped")
    except ConflictError as e:
        raise TieringError(
            f"table {table!r} is still job {holder!r}'s: {e}. That job is tiering it: exclude the table from "
            f"job {holder!r} or stop it, then take it over",
            table=table,
        ) from None


def _refuse_while_holder_leads(config: TieringConfig, table: str, holder: str, timeout_s: float) -> None:
    leader = read_status(config.zookeeper.hosts, holder, timeout_s=timeout_s).leader
    if leader is not None:
        raise TieringError(
            f"table {table!r} is held by job {holder!r}, which is led by {leader} right now and may still tier "
            f"it: exclude the table from job {holder!r} or stop it, then pass --force",
            table=table,
        )


def _take_over_from_lake(config: TieringConfig, table: str, *, force: bool, timeout_s: float) -> HandOver | None:
    """:func:`take_over` over Fluss, which keeps no lake report: the holder is the job whose round
    commit is the newest in this job's lake table (None when that is this job's, or there is none),
    and its lease's holds of the table's buckets are released (its other tables keep theirs)."""
    from tiering.delta_log.lake import Lake
    from tiering.kvstore.contract import BucketId
    from tiering.ops.fluss_leases import release_fluss_holds
    from tiering.ops.preflight import fluss_store

    store = fluss_store(config, timeout_s)
    try:
        try:
            described = store.table(table)
        except TableNotFoundError:
            where = config.kvstore.where
            raise TieringError(f"table {table!r} does not exist in Fluss at {where}", table=table) from None
        loaded = Lake.of(config.lake).load(table)
        commit = loaded.info if loaded is not None else None
        if commit is None or commit.job == config.job.name:
            return None
        if not force:
            _refuse_while_holder_leads(config, table, commit.job, timeout_s)
        table_ids = sorted({described.table_id, commit.position.table_id})
        buckets = [BucketId(t, b) for t in table_ids for b in range(described.num_buckets)]
        release_fluss_holds(store, commit.lease_id, buckets)
    finally:
        store.close()
    released = (
        f"lease {commit.lease_id} released its holds of the table (its commit: Delta version {commit.delta_version})"
    )
    return HandOver(commit.job, commit.delta_version, released)
