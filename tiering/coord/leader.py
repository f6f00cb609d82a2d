"""What the job uses to lead: ``acquire_leadership()`` -> a ``LeaderTerm`` (docs/DESIGN.md §7).

Failure mode it encapsulates: a leader that keeps acting after it stopped being one. A term
ends (``lost`` is set, ``on_lost`` runs) when the session watchdog gives up on the session,
and a term can always ask ``check()`` whether the epoch moved on; its ZooKeeper writes are
fenced by the epoch so a stale term's write is refused even before it notices. When a term is
lost its session is closed so the next contender need not wait for the server to expire it.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, KazooException, NoNodeError, OperationTimeoutError

from tiering.coord.client import close_quietly, connect, granted_timeout_s
from tiering.coord.election import JobElection
from tiering.coord.epoch import Epoch, read_epoch
from tiering.coord.fencing import fenced_set
from tiering.coord.paths import epoch_path, job_path, leader_path, owner_path, validate_job
from tiering.coord.watchdog import SessionWatchdog
from tiering.epochs import JobEpoch
from tiering.errors import CoordinationError, LeadershipLostError

__all__ = ["JobCoordination", "LeaderTerm", "acquire_leadership", "read_status"]

log = logging.getLogger(__name__)

#: kazoo's errors for a request whose connection was lost (the session not necessarily)
_CONNECTION_LOST = (ConnectionLoss, OperationTimeoutError)
#: the pause before a question is asked again (kazoo holds it until it has reconnected)
_ASK_AGAIN_S = 0.1


class LeaderTerm:
    """One leadership term of a job: its epoch, a ``lost`` event, its term check (:meth:`check`),
    fenced writes, ``resign()``. ``granted`` is the epoch ZooKeeper granted the term with the epoch
    znode's version the term wrote: what the fence of each of its writes checks."""

    def __init__(
        self,
        zk: KazooClient,
        election: JobElection,
        granted: Epoch,
        *,
        on_lost: Callable[[], None] | None = None,
        suspended_grace_s: float | None = None,
    ) -> None:
        self.zk = zk
        self.job = election.job
        self.granted = granted
        self._election = election
        self._on_lost = on_lost
        self._over = threading.Lock()
        self._watchdog = SessionWatchdog(
            zk, self._watchdog_fired, grace_s=suspended_grace_s, name=f"zk-watchdog-{self.job}"
        )
        # The watchdog's own flag is the term's: it is set before on_lost runs.
        self.lost: threading.Event = self._watchdog.lost
        #: Why :meth:`check` first refused this term a write (None while it never did): a round
        #: aborted by the term check fails its query with Spark's wrapper around the error, and a
        #: refusal because ZooKeeper could not be asked leaves no trace in ZooKeeper once it is back.
        self.refusal: str | None = None

    @property
    def epoch(self) -> JobEpoch:
        """The job epoch of this term, which every lease call, lake report and commit of it carries."""
        return self.granted.value

    @property
    def session_timeout_s(self) -> float:
        """The session timeout the server granted this term's session (coord/client.py): what it
        expires the session by, so what a peer waiting for this member to leave waits."""
        return granted_timeout_s(self.zk)

    @property
    def lost_reason(self) -> str | None:
        return self._watchdog.reason

    def check(self) -> None:
        """Raise LeadershipLostError unless this term still holds the lock and the epoch is ours
        (the first refusal is kept in :attr:`refusal`).

        A connection lost while asking is no answer: the session may live through it (kazoo
        reconnects to it within its timeout), and a term ended then would end for nothing. The
        question is asked again on the session's next connection, for as long as the watchdog
        keeps the term (a session that does not come back ends it, and the question with it)."""
        if self.lost.is_set():
            raise self._refuse(f"leadership of job {self.job!r} (epoch {self.epoch}) lost: {self.lost_reason}")
        node = self._election.lock_node
        deadline = time.monotonic() + self._watchdog.grace_s
        while True:
            try:
                current, holds_lock = self._ask(node)
                break
            except (CoordinationError, KazooException) as e:
                if _connection_lost(e) and time.monotonic() < deadline and not self.lost.wait(_ASK_AGAIN_S):
                    log.info(
                        "job %r (epoch %d): connection lost confirming leadership; asking again", self.job, self.epoch
                    )
                    continue
                reason = self.lost_reason if self.lost.is_set() else repr(e)
                raise self._refuse(
                    f"cannot confirm leadership of job {self.job!r} (epoch {self.epoch}): {reason}"
                ) from e
        if current != self.granted:
            raise self._refuse(
                f"job {self.job!r}: epoch at {epoch_path(self.job)} moved on to {current} from our {self.granted}"
            )
        if not holds_lock:
            raise self._refuse(f"job {self.job!r} (epoch {self.epoch}): our lock node {node} is gone (session expired)")

    def _ask(self, node: str | None) -> tuple[Epoch | None, bool]:
        """The job's epoch now, and whether this term's lock node still exists."""
        current = read_epoch(self.zk, self.job)
        return current, node is not None and self.zk.exists(node) is not None

    def _refuse(self, reason: str) -> LeadershipLostError:
        if self.refusal is None:
            self.refusal = reason
        return LeadershipLostError(reason, epoch=self.epoch)

    def fenced_set(self, path: str, value: bytes) -> int:
        """Create or overwrite ``path`` only if the epoch is still ours; return its new version."""
        if self.lost.is_set():
            raise LeadershipLostError(
                f"write of {path} refused: leadership of job {self.job!r} (epoch {self.epoch}) lost: "
                f"{self.lost_reason}",
                epoch=self.epoch,
            )
        return fenced_set(self.zk, self.job, self.granted, path, value)

    def resign(self) -> None:
        """End the term: stop watching, give up the lock, close the session. Idempotent."""
        self._watchdog.stop()
        self.lost.set()
        with self._over:
            self._election.release()
            close_quietly(self.zk)
        log.info("resigned leadership of job %r (epoch %d)", self.job, self.epoch)

    def __enter__(self) -> LeaderTerm:
        return self

    def __exit__(self, *exc) -> None:
        self.resign()

    def _start(self) -> None:
        self._watchdog.start()
        # A session that expired between the epoch bump and the watchdog's start was reported
        # to nobody (kazoo has reconnected with a new session since): look at the lock node.
        self.check()

    def _watchdog_fired(self, reason: str) -> None:
        if self._on_lost is not None:
            self._on_lost()
        # Closing the session deletes our lock node now if the server is reachable, rather than
        # after the server expires it: the standby takes over sooner.
        with self._over:
            close_quietly(self.zk)


def acquire_leadership(
    hosts: str,
    job: str,
    session_timeout_s: float,
    *,
    owner: dict | None = None,
    auth: tuple[str, str] | None = None,
    timeout_s: float | None = None,
    on_lost: Callable[[], None] | None = None,
    connect_timeout_s: float = 15.0,
    suspended_grace_s: float | None = None,
    cancel: threading.Event | None = None,
) -> LeaderTerm:
    """Block until this process leads ``job`` (a standby waits here), then return its term.

    The term's epoch is persisted before this returns. ``timeout_s`` bounds the whole wait
    (None: wait for ever); connecting is bounded by ``connect_timeout_s`` either way.
    ``on_lost`` runs once, in the watchdog's thread, when the term is lost (not on resign).
    ``suspended_grace_s`` (default: the session timeout the server granted) is how long the term
    survives a disconnection; a third of it makes it step down before the server can expire its
    session, i.e. before a standby can lead, at the price of stepping down on shorter blips.
    ``cancel`` set while waiting makes the wait give up with CoordinationError (a standby told
    to stop must not hang in the queue until the leader goes away).
    """
    validate_job(job)
    if not session_timeout_s > 0:
        raise CoordinationError(f"zookeeper.session_timeout_s must be > 0, got {session_timeout_s!r}")
    deadline = math.inf if timeout_s is None else time.monotonic() + timeout_s
    zk = connect(hosts, session_timeout_s, auth=auth, timeout_s=min(connect_timeout_s, timeout_s or math.inf))
    if (granted := granted_timeout_s(zk)) != session_timeout_s:
        log.warning(
            "job %r: ZooKeeper at %s granted a %.1fs session timeout, not the %.1fs configured (its "
            "min/maxSessionTimeout): the session expires, and the leader steps down, by the granted one",
            job,
            hosts,
            granted,
            session_timeout_s,
        )
    try:
        election = JobElection(zk, job, owner)
        remaining = None if timeout_s is None else max(0.0, deadline - time.monotonic())
        waited = threading.Event()
        if cancel is not None:
            threading.Thread(
                target=_cancel_when, args=(cancel, waited, election), name=f"zk-cancel-{job}", daemon=True
            ).start()
        try:
            won = election.win(remaining)
        finally:
            waited.set()
        term = LeaderTerm(
            zk,
            election,
            won,
            on_lost=on_lost,
            suspended_grace_s=suspended_grace_s,
        )
        term._start()
        return term
    except BaseException:
        close_quietly(zk)
        raise


def _connection_lost(error: BaseException) -> bool:
    """``error`` (or what it wraps) is a connection lost mid-request: the session may live on."""
    return isinstance(error, _CONNECTION_LOST) or isinstance(error.__cause__, _CONNECTION_LOST)


def _cancel_when(cancel: threading.Event, waited: threading.Event, election: JobElection) -> None:
    # Waits on ``cancel`` in slices so the thread also ends once the wait for leadership is over.
    while not waited.is_set():
        if cancel.wait(0.2):
            election.cancel()
            return


@dataclass(frozen=True)
class JobCoordination:
    """What ZooKeeper says of a job: ``epoch`` (and its znode's ``epoch_version``) of the latest
    term, None before the first; ``owner``, the record of the latest term (it outlives its
    leader); ``leader``, who holds the lock now (``host:pid``) or None; ``contenders``, how many
    processes are queued, the leader included."""

    job: str
    epoch: int | None = None
    epoch_version: int | None = None
    owner: dict | None = None
    leader: str | None = None
    contenders: int = 0


def read_status(hosts: str, job: str, *, timeout_s: float = 10.0) -> JobCoordination:
    """Leader and epoch of ``job`` for ``tiering status``: read-only, works without the job's auth."""
    validate_job(job)
    zk = connect(hosts, session_timeout_s=max(timeout_s, 2.0), timeout_s=timeout_s)
    try:
        if zk.exists(job_path(job)) is None:
            return JobCoordination(job)
        current = read_epoch(zk, job)
        try:
            raw, _ = zk.get(owner_path(job))
        except NoNodeError:
            raw = None
        try:
            owner = None if raw is None else json.loads(raw)
        except ValueError:
            raise CoordinationError(
                f"owner znode {owner_path(job)} of job {job!r} holds no JSON: {raw[:80]!r}"
            ) from None
        contenders = zk.Lock(leader_path(job)).contenders() if zk.exists(leader_path(job)) else []
        return JobCoordination(
            job,
            epoch=None if current is None else current.value,
            epoch_version=None if current is None else current.version,
            owner=owner,
            leader=contenders[0] if contenders else None,
            contenders=len(contenders),
        )
    except KazooException as e:
        raise CoordinationError(f"cannot read status of job {job!r} from ZooKeeper at {hosts}: {e!r}") from e
    finally:
        close_quietly(zk)
