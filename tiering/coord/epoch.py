"""The job's epoch: a persistent counter in ZooKeeper, bumped once per leadership term.

Failure mode it prevents: two drivers that both believe they lead. Every term gets an epoch
strictly larger than every earlier one, because the bump is a compare-and-set on the znode's
version (a concurrent bump makes ours fail and retry from the new value), and it is guarded by
a ``check`` on the bumper's lock node in the same transaction: a contender whose session has
already expired cannot bump. The epoch is persisted before anything else of the term happens,
so every later write, lease call and Delta commit can carry it and be fenced where it lands.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import NamedTuple

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionClosedError, KazooException, NoNodeError, RolledBackError, SessionExpiredError

from tiering.coord.cas import CasConflict, compare_and_set, create_or_set, is_conflict
from tiering.coord.paths import ensure_job_znodes, epoch_path
from tiering.epochs import JobEpoch
from tiering.errors import CoordinationError, LeadershipLostError

__all__ = ["Epoch", "read_epoch", "bump_epoch"]

log = logging.getLogger(__name__)


class Epoch(NamedTuple):
    """A term's epoch and the epoch znode's version written by that term (what the fence of its writes checks)."""

    value: JobEpoch
    version: int


def _decode(path: str, data: bytes) -> JobEpoch:
    try:
        value = int(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise CoordinationError(f"epoch znode {path} holds {data[:40]!r}, not a decimal integer") from None
    if value < 0:
        raise CoordinationError(f"epoch znode {path} holds a negative epoch {value}", epoch=value)
    return JobEpoch(value)


def read_epoch(zk: KazooClient, job: str) -> Epoch | None:
    """The current epoch of ``job``, or None when no term ever started."""
    path = epoch_path(job)
    try:
        data, stat = zk.get(path)
    except NoNodeError:
        return None
    except KazooException as e:
        raise CoordinationError(f"cannot read epoch of job {job!r} at {path}: {e!r}") from e
    return Epoch(_decode(path, data), stat.version)


def bump_epoch(zk: KazooClient, job: str, *, guard: str | None = None) -> Epoch:
    """Persist ``current + 1`` (1 when missing) and return it with the znode version it got.

    ``guard`` is a znode that must still exist for the bump to land (the caller's ephemeral
    lock node): when it is gone this raises LeadershipLostError and nothing is written. A
    concurrent bump makes this one retry from the new value (coord/cas.py).
    """
    ensure_job_znodes(zk, job)
    return compare_and_set(partial(_bump_once, zk, job, guard), what=f"epoch of job {job!r} at {epoch_path(job)}")


def _bump_once(zk: KazooClient, job: str, guard: str | None) -> Epoch:
    """One compare-and-set of the epoch; CasConflict when another bump landed since the read."""
    path = epoch_path(job)
    current = read_epoch(zk, job)
    new_value = JobEpoch(1 if current is None else current.value + 1)
    tx = zk.transaction()
    if guard is not None:
        tx.check(guard, -1)
    create_or_set(tx, path, str(new_value).encode(), None if current is None else current.version)
    try:
        results = tx.commit()
    except (SessionExpiredError, ConnectionClosedError) as e:
        raise LeadershipLostError(f"session ended while bumping epoch of job {job!r} at {path}: {e!r}") from e
    except KazooException as e:
        raise CoordinationError(f"cannot bump epoch of job {job!r} at {path}: {e!r}") from e
    outcome = results[-1]
    if guard is not None and isinstance(results[0], NoNodeError):
        raise LeadershipLostError(
            f"lock node {guard} of job {job!r} is gone (session expired?): epoch at {path} not bumped",
            epoch=current.value if current else None,
        )
    if is_conflict(outcome):
        raise CasConflict(path)
    errors = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
    if errors:
        raise CoordinationError(f"cannot bump epoch of job {job!r} at {path}: {errors[0]!r}")
    version = 0 if current is None else outcome.version
    log.info("job %r epoch bumped to %d (znode %s version %d)", job, new_value, path, version)
    return Epoch(new_value, version)
