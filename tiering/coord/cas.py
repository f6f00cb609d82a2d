"""Compare-and-set on one znode: write the next value only over the version read, else read again.

Failure mode it prevents: a lost update. Two writers that both read value n and both write n + 1
would hand one epoch to two terms or two owners. Each attempt writes conditionally on what it
read: a ``set`` at the znode version it read, or a ``create`` when it read nothing. When another
writer got there first, ZooKeeper refuses the write (BadVersionError, NodeExistsError, or
NoNodeError when the znode was deleted meanwhile) and the attempt raises :class:`CasConflict`;
:func:`compare_and_set` then retries from the new value. After :data:`MAX_CAS_ATTEMPTS` conflicts
in a row it gives up with a CoordinationError naming the znode: a znode that keeps changing under
a writer is contention to report, not to wait out. What else an attempt's transaction checks (the
bumper's lock node, coord/epoch.py; its job epoch, coord/fencing.py) is the caller's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from kazoo.client import TransactionRequest
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.security import ACL

from tiering.errors import CoordinationError

__all__ = ["MAX_CAS_ATTEMPTS", "CasConflict", "compare_and_set", "create_or_set", "is_conflict"]

log = logging.getLogger(__name__)

#: Conflicts in a row after which :func:`compare_and_set` gives up.
MAX_CAS_ATTEMPTS = 20

R = TypeVar("R")


class CasConflict(Exception):
    """An attempt's write lost to a concurrent one: the znode is no longer as the attempt read it."""


def is_conflict(result: object) -> bool:
    """Whether kazoo's result for a conditional write says another writer changed the znode first."""
    return isinstance(result, (BadVersionError, NodeExistsError, NoNodeError))


def create_or_set(
    tx: TransactionRequest, path: str, data: bytes, version: int | None, acl: list[ACL] | None = None
) -> None:
    """Add the conditional write to ``tx``: create ``path`` when none was read (``version`` None;
    ``acl`` None is the client's default), else set it at the version read."""
    if version is None:
        tx.create(path, data, acl=acl)
    else:
        tx.set_data(path, data, version=version)


def compare_and_set(attempt: Callable[[], R], *, what: str) -> R:
    """Run ``attempt`` (read, then write conditionally) until it does not raise CasConflict; return
    its result. ``what`` names the znode for the log and the error ("epoch of job 'orders' at
    /tiering/jobs/orders/epoch")."""
    for _ in range(MAX_CAS_ATTEMPTS):
        try:
            return attempt()
        except CasConflict:
            log.info("%s changed concurrently; retrying", what)
    raise CoordinationError(f"{what} kept changing: gave up after {MAX_CAS_ATTEMPTS} conflicting writes")
