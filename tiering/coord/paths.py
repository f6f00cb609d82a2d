"""The znode layout of a job, in one place, so no two modules disagree on a path (docs/DESIGN.md §7).

Failure mode it prevents: a job name with a ``/`` (or an empty one) would silently address
another job's subtree, or a parent node; it is refused with an error naming the job.
"""

from __future__ import annotations

from urllib.parse import quote

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.security import OPEN_ACL_UNSAFE

from tiering.errors import ConfigError, CoordinationError

__all__ = [
    "ROOT",
    "JOBS",
    "job_path",
    "leader_path",
    "epoch_path",
    "owner_path",
    "validate_job",
    "ensure_job_znodes",
    "GROUPS",
    "group_path",
    "members_path",
    "table_epochs_path",
    "table_epoch_path",
    "ensure_group_znodes",
]

ROOT = "/tiering"
JOBS = f"{ROOT}/jobs"
GROUPS = f"{ROOT}/groups"


def validate_job(job: str) -> str:
    if not job or "/" in job or job in (".", "..") or job != job.strip() or "\x00" in job:
        raise ConfigError([f"job.name: {job!r} is not a valid job name (non-empty, no '/', no surrounding blanks)"])
    return job


def job_path(job: str) -> str:
    return f"{JOBS}/{validate_job(job)}"


def leader_path(job: str) -> str:
    return f"{job_path(job)}/leader"


def epoch_path(job: str) -> str:
    return f"{job_path(job)}/epoch"


def owner_path(job: str) -> str:
    return f"{job_path(job)}/owner"


def ensure_job_znodes(zk: KazooClient, job: str) -> None:
    """Create ``/tiering/jobs/<job>`` if missing.

    The shared parents are world-writable so every job can create its own node; the job node
    gets the client's default ACL, which is the job's digest ACL when the job uses auth.
    """
    try:
        zk.ensure_path(JOBS, acl=OPEN_ACL_UNSAFE)
        zk.ensure_path(job_path(job))
    except KazooException as e:
        raise CoordinationError(f"cannot create the znodes of job {job!r} at {job_path(job)}: {e!r}") from e


def group_path(group: str) -> str:
    """``/tiering/groups/<group>``: a tiering group's members and table epochs. A group's name is
    checked as a job's is (it addresses a subtree the same way)."""
    try:
        return f"{GROUPS}/{validate_job(group)}"
    except ConfigError:
        raise ConfigError([f"job.group: {group!r} is not a valid group name (non-empty, no '/')"]) from None


def members_path(group: str) -> str:
    return f"{group_path(group)}/members"


def table_epochs_path(group: str) -> str:
    return f"{group_path(group)}/tables"


def table_epoch_path(group: str, table: str) -> str:
    """A table's epoch znode. The table's name is percent-encoded into one znode name: a store's
    table name may hold characters ZooKeeper refuses in a path, and ``.``/``..`` are encoded too."""
    return f"{table_epochs_path(group)}/{quote(table, safe='').replace('.', '%2E')}"


def ensure_group_znodes(zk: KazooClient, group: str) -> None:
    """Create the group's members and tables nodes if missing, world-writable like the shared
    parents: the group's members are several jobs, each with its own credentials."""
    try:
        zk.ensure_path(members_path(group), acl=OPEN_ACL_UNSAFE)
        zk.ensure_path(table_epochs_path(group), acl=OPEN_ACL_UNSAFE)
    except KazooException as e:
        raise CoordinationError(f"cannot create the znodes of group {group!r} at {group_path(group)}: {e!r}") from e
