"""Leader election of one job: a kazoo Lock at ``/tiering/jobs/<job>/leader``, then the term's
epoch bump and owner record.

Failure modes: the lock alone does not stop a paused ex-leader from acting (its ephemeral node
vanishes only when the server expires its session, and it learns so late). So winning the lock
is not enough: the winner bumps the epoch in a transaction guarded by its own lock node
(a contender whose session already expired cannot bump), and from then on every write is fenced
by that epoch (fencing.py). The owner record is the first fenced write of the term, telling
``tiering status`` who leads.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from datetime import UTC, datetime

from kazoo.client import KazooClient
from kazoo.exceptions import CancelledError, KazooException, LockTimeout

from tiering.coord.epoch import Epoch, bump_epoch
from tiering.coord.fencing import fenced_set
from tiering.coord.paths import ensure_job_znodes, leader_path, owner_path
from tiering.errors import CoordinationError

__all__ = ["JobElection"]

log = logging.getLogger(__name__)


class JobElection:
    """One contender for the leadership of ``job``; ``win()`` blocks while another leads."""

    def __init__(self, zk: KazooClient, job: str, owner: dict | None = None) -> None:
        self.zk = zk
        self.job = job
        self.owner = {"host": socket.gethostname(), "pid": os.getpid(), **(owner or {})}
        self._lock = zk.Lock(leader_path(job), identifier=f"{self.owner['host']}:{self.owner['pid']}")

    @property
    def lock_node(self) -> str | None:
        """The ephemeral sequential znode holding our place in the queue (None before queuing)."""
        return None if self._lock.node is None else f"{self._lock.path}/{self._lock.node}"

    def win(self, timeout_s: float | None = None) -> Epoch:
        """Wait for the lock, bump the epoch, record the owner; return the term's epoch."""
        ensure_job_znodes(self.zk, self.job)
        try:
            acquired = self._lock.acquire(timeout=timeout_s)
        except LockTimeout:
            acquired = False
        except CancelledError as e:
            raise CoordinationError(f"wait for leadership of job {self.job!r} was cancelled") from e
        except KazooException as e:
            raise CoordinationError(
                f"cannot queue for leadership of job {self.job!r} at {leader_path(self.job)}: {e!r}"
            ) from e
        if not acquired:
            raise CoordinationError(
                f"job {self.job!r} is led by someone else ({self.current_leader()}); "
                f"no leadership at {leader_path(self.job)} within {timeout_s}s"
            )
        try:
            epoch = bump_epoch(self.zk, self.job, guard=self.lock_node)
            record = {**self.owner, "epoch": epoch.value, "started_at": datetime.now(UTC).isoformat()}
            fenced_set(self.zk, self.job, epoch, owner_path(self.job), json.dumps(record, sort_keys=True).encode())
        except BaseException:
            self.release()
            raise
        log.info("won leadership of job %r with epoch %d", self.job, epoch.value)
        return epoch

    def current_leader(self) -> str:
        """The lock holder's identifier (``host:pid``), or ``nobody``."""
        try:
            contenders = self._lock.contenders()
        except KazooException as e:
            return f"unknown ({e!r})"
        return contenders[0] if contenders else "nobody"

    def cancel(self) -> None:
        """Make a ``win()`` blocked in another thread give up with CoordinationError."""
        self._lock.cancel()

    def release(self) -> None:
        """Leave the queue or give up the lock; best effort (an expired session released it already)."""
        try:
            self._lock.release()
        except KazooException as e:
            log.info("could not release leadership of job %r (session gone?): %r", self.job, e)
