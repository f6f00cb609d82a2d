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

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    SessionExpiredError,
)

from tiering.coord.epoch import Epoch
from tiering.coord.paths import epoch_path
from tiering.errors import CoordinationError, FencedEpochError, LeadershipLostError

__all__ = ["commit_fenced", "fenced_set", "OperationFailed"]

_CREATE_OR_SET_ATTEMPTS = 5


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

    The parent is created unfenced when missing (an empty parent is harmless to a newer term).
    """
    what = f"write of {path}"
    try:
        zk.ensure_path(path.rsplit("/", 1)[0] or "/")
        exists = zk.exists(path) is not None
    except (SessionExpiredError, ConnectionClosedError) as e:
        raise LeadershipLostError(f"{what} for job {job!r}: session ended: {e!r}", epoch=epoch.value) from e
    except KazooException as e:
        raise CoordinationError(f"{what} for job {job!r} (epoch {epoch.value}): {e!r}", epoch=epoch.value) from e
    for _ in range(_CREATE_OR_SET_ATTEMPTS):
        try:
            if exists:
                (stat,) = commit_fenced(zk, job, epoch, lambda tx: tx.set_data(path, value), what=what)
                return stat.version
            commit_fenced(zk, job, epoch, lambda tx: tx.create(path, value), what=what)
            return 0
        except OperationFailed as e:
            # Someone created or deleted the node between our exists() and the commit.
            if not isinstance(e.error, (NodeExistsError, NoNodeError)):
                raise
            exists = isinstance(e.error, NodeExistsError)
    raise CoordinationError(f"{what} for job {job!r}: node kept appearing and vanishing", epoch=epoch.value)
