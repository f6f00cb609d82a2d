"""Epoch-fenced ZooKeeper writes: every write of a leader is a transaction that first checks
that the epoch znode still has the version this term wrote (like Kafka's controller epoch).

Failure mode it prevents: a stale leader (paused by GC or SIGSTOP, cut off by a partition)
overwriting the state of a newer term. The check and the write commit atomically, so once a
newer term bumped the epoch, the stale write is rejected by ZooKeeper itself.

kazoo's ``TransactionRequest.commit()`` does not raise when an operation fails: it returns the
exception in the result list (the failing op) next to ``RolledBackError`` (the others). Those
results are inspected here and turned into typed errors naming the job, path and epoch.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TypeVar

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    KazooException,
    NoNodeError,
    RolledBackError,
    SessionExpiredError,
)

from tiering.coord.cas import CasConflict, compare_and_set, create_or_set, is_conflict
from tiering.coord.epoch import Epoch
from tiering.coord.paths import epoch_path
from tiering.errors import CoordinationError, FencedEpochError, LeadershipLostError

__all__ = ["commit_fenced", "fenced_set", "OperationFailed"]

R = TypeVar("R")


class OperationFailed(CoordinationError):
    """A fenced transaction passed its epoch check but one of its own operations failed.

    ``error`` is kazoo's exception for that operation, ``index`` its position (0 = first op
    after the check), so callers can react to e.g. NodeExistsError.
    """

    def __init__(self, message: str, *, error: Exception, index: int, epoch: int | None = None) -> None:
        super().__init__(message, epoch=epoch)
        self.error = error
        self.index = index


def commit_fenced(
    zk: KazooClient, job: str, epoch: Epoch, build: Callable[[TransactionRequest], None], *, what: str
) -> list:
    """Commit ``check(epoch path, epoch.version)`` + the operations ``build`` adds; return their results.

    Raises FencedEpochError when the epoch moved on (or its znode vanished), LeadershipLostError
    when the session is gone, OperationFailed when one of the operations failed, and
    CoordinationError when the outcome is unknown (connection loss: the caller may retry,
    the check makes a retried write safe).
    """
    fence_path = epoch_path(job)
    tx = zk.transaction()
    tx.check(fence_path, epoch.version)
    build(tx)
    try:
        results = tx.commit()
    except (SessionExpiredError, ConnectionClosedError) as e:
        raise LeadershipLostError(
            f"{what} for job {job!r} not written: session ended (epoch {epoch.value}): {e!r}", epoch=epoch.value
        ) from e
    except KazooException as e:
        raise CoordinationError(
            f"{what} for job {job!r} in doubt (epoch {epoch.value}): {e!r}", epoch=epoch.value
        ) from e
    fence = results[0]
    if isinstance(fence, (BadVersionError, NoNodeError)):
        raise FencedEpochError(
            f"{what} for job {job!r} fenced: epoch znode {fence_path} is no longer at version {epoch.version} "
            f"written by epoch {epoch.value}; a newer leader exists",
            code="FENCED_EPOCH",
            epoch=epoch.value,
        )
    # A passed check is RolledBackError when a later operation failed: that one is reported below.
    if isinstance(fence, Exception) and not isinstance(fence, RolledBackError):
        raise CoordinationError(
            f"{what} for job {job!r}: epoch check on {fence_path} failed: {fence!r}", epoch=epoch.value
        )
    for index, result in enumerate(results[1:]):
        if isinstance(result, Exception) and not isinstance(result, RolledBackError):
            raise OperationFailed(
                f"{what} for job {job!r} (epoch {epoch.value}) failed: {result!r}",
                error=result,
                index=index,
                epoch=epoch.value,
            )
    return results[1:]


def fenced_set(zk: KazooClient, job: str, epoch: Epoch, path: str, value: bytes) -> int:
    """Create or overwrite ``path`` under the epoch fence; return the znode's new version.

    The parent is created unfenced when missing (an empty parent is harmless to a newer term). A
    node created or deleted between the read and the commit is read again (coord/cas.py).
    """
    what = f"write of {path}"
    _zk_call(zk.ensure_path, path.rsplit("/", 1)[0] or "/", job=job, epoch=epoch, what=what)
    return compare_and_set(partial(_set_once, zk, job, epoch, path, value), what=f"{what} for job {job!r}")


def _set_once(zk: KazooClient, job: str, epoch: Epoch, path: str, value: bytes) -> int:
    """One fenced create or overwrite, as the read found ``path``; CasConflict when it appeared
    or vanished since. An overwrite is at any version (-1): the epoch check orders the writers."""
    what = f"write of {path}"
    stat = _zk_call(zk.exists, path, job=job, epoch=epoch, what=what)
    try:
        results = commit_fenced(
            zk, job, epoch, lambda tx: create_or_set(tx, path, value, None if stat is None else -1), what=what
        )
    except OperationFailed as e:
        if is_conflict(e.error):
            raise CasConflict(path) from e
        raise
    return 0 if stat is None else results[0].version


def _zk_call(call: Callable[[str], R], path: str, *, job: str, epoch: Epoch, what: str) -> R:
    """``call(path)``, its failure typed: the session's end is leadership lost."""
    try:
        return call(path)
    except (SessionExpiredError, ConnectionClosedError) as e:
        raise LeadershipLostError(f"{what} for job {job!r}: session ended: {e!r}", epoch=epoch.value) from e
    except KazooException as e:
        raise CoordinationError(f"{what} for job {job!r} (epoch {epoch.value}): {e!r}", epoch=epoch.value) from e
