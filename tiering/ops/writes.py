"""The operator commands' writes: `tiering leases drop` and `tiering take-over`.

Failure modes this guards against: an operator's write under a running job. Dropping a lease while
a leader runs would let the store collect snapshots the leader is reading: :func:`drop_lease`
refuses unless no leader holds the job (or the operator forces it). Dropping another job's lake
report while that job tiers the table would have its next report take the table back:
:func:`take_over` refuses while the holder leads, and names the report it checked in the drop, so
a term of the holder that starts in between keeps its fresh report. Nothing here writes to the
lake, the checkpoint or ZooKeeper; each write is one store call.
"""

from __future__ import annotations

from tiering.conf.model import TieringConfig
from tiering.coord.leader import read_status
from tiering.errors import ConflictError, LeaseNotFoundError, TableNotFoundError, TieringError
from tiering.kvstore.models import LakeReport, Lease
from tiering.ops.status import checkpoint_lease_id, operator_client
from tiering.state.lease_file import job_of_lease

__all__ = ["drop_lease", "take_over"]


def drop_lease(config: TieringConfig, lease_id: str | None = None, *, force: bool = False, timeout_s: float) -> Lease:
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
    client = operator_client(config, timeout_s)
    try:
        lease = client.get_lease(lease_id)
        client.drop_lease(lease_id, lease.epoch)
    except LeaseNotFoundError:
        raise TieringError(
            f"lease {lease_id!r} does not exist in the store at {config.kvstore.url} (already dropped or expired)",
            lease_id=lease_id,
        ) from None
    return lease


def _refuse_while_led(config: TieringConfig, job: str, lease_id: str, then: str, timeout_s: float) -> None:
    leader = read_status(config.zookeeper.hosts, job, timeout_s=timeout_s).leader
    if leader is not None:
        raise TieringError(f"job {job!r} is led by {leader} right now: {then}", lease_id=lease_id)


def take_over(
    config: TieringConfig, table: str, *, force: bool = False, timeout_s: float
) -> tuple[str, LakeReport] | None:
    """Hand ``table`` over to this job: drop the lake report another job holds it by, so this job's
    next report holds it (docs/DESIGN.md §5). Returns that job and its dropped report; None when no
    other job holds the table (nothing to drop).

    Refused while a driver leads the holding job, unless ``force``: that job may still tier the
    table, and its next report would take it back (exclude the table there, then force). The drop
    names the report checked, so a term of the holder that starts between the check and the drop
    keeps its fresh report: refused, naming it.
    """
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
        leader = read_status(config.zookeeper.hosts, holder, timeout_s=timeout_s).leader
        if leader is not None:
            raise TieringError(
                f"table {table!r} is held by job {holder!r}, which is led by {leader} right now and may still tier "
                f"it: exclude the table from job {holder!r} or stop it, then pass --force",
                table=table,
            )
    try:
        return holder, client.drop_lake(table, report)
    except ConflictError as e:
        raise TieringError(
            f"table {table!r} is still job {holder!r}'s: {e}. That job is tiering it: exclude the table from "
            f"job {holder!r} or stop it, then take it over",
            table=table,
        ) from None
