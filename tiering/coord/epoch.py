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
from typing import NamedTuple

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    SessionExpiredError,
)

from tiering.coord.paths import ensure_job_znodes, epoch_path
from tiering.errors import CoordinationError, LeadershipLostError

__all__ = ["Epoch", "read_epoch", "bump_epoch", "MAX_BUMP_ATTEMPTS"]

log = logging.getLogger(__name__)

MAX_BUMP_ATTEMPTS = 20


class Epoch(NamedTuple):
    """A term's epoch and the epoch znode's version written by that term (the fence)."""

    value: int
    version: int


def _decode(path: str, data: bytes) -> int:
    try:
        value = int(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise CoordinationError(f"epoch znode {path} holds {data[:40]!r}, not a decimal integer") from None
    if value < 0:
        raise CoordinationError(f"epoch znode {path} holds a negative epoch {value}", epoch=value)
    return value


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
    lock node): when it is gone this raises LeadershipLostError and nothing is written.
    """
    path = epoch_path(job)
    ensure_job_znodes(zk, job)
    for _ in range(MAX_BUMP_ATTEMPTS):
        current = read_epoch(zk, job)
        new_value = 1 if current is None else current.value + 1
        tx = zk.transaction()
        if guard is not None:
            tx.check(guard, -1)
        if current is None:
            tx.create(path, str(new_value).encode())
        else:
            tx.set_data(path, str(new_value).encode(), version=current.version)
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
        if isinstance(outcome, (BadVersionError, NodeExistsError, NoNodeError)):
            log.info("epoch of job %r at %s changed concurrently; retrying the bump", job, path)
            continue
        errors = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
        if errors:
            raise CoordinationError(f"cannot bump epoch of job {job!r} at {path}: {errors[0]!r}")
        version = 0 if current is None else outcome.version
        log.info("job %r epoch bumped to %d (znode %s version %d)", job, new_value, path, version)
        return Epoch(new_value, version)
    raise CoordinationError(f"epoch of job {job!r} at {path} kept changing: gave up after {MAX_BUMP_ATTEMPTS} bumps")
