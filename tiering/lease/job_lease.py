"""The job-scoped snapshot lease: hold snapshots against the store's GC while a round reads them.

Failure modes: a lease that quietly expired (a long GC pause, a store restart past the
expiry, a stopped renewer) no longer protects anything, and the store may delete the held
snapshot files under a running read. So :meth:`JobLease.renew` reports expiry as ``False``
rather than hiding it, and callers re-acquire and re-check availability instead of assuming
the holds survived. A driver whose epoch was superseded must stop: :class:`FencedEpochError`
always propagates, from the calls and from the renewer thread (via :meth:`LeaseRenewer.check`).

A store without the lease API (a reference store that predates it, a Fluss server that does not
know the calls) answers any lease call with :class:`LeaseUnsupportedError`: :meth:`JobLease.claim`
finds that out as the term starts (any later call too), says so in one WARNING and turns the
lease off (every call a no-op), so the job tiers without protection from the store's GC instead
of failing every round; a lease call failing for any other reason still fails as it did.

Every call goes through the store seam (:class:`~tiering.kvstore.contract.SnapshotLease`). The
per-table holdings live in the store (:meth:`JobLease.held`, where the store lists them), so this
object keeps no copy that could drift; only the expiry is kept here, since the seam answers none.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from tiering.epochs import JobEpoch
from tiering.errors import LeaseNotFoundError, LeaseUnsupportedError, NotFoundError, RetryableError
from tiering.kvstore.contract import BucketId, SnapshotLease, SnapshotRef, TableClaims

__all__ = ["JobLease", "LeaseRenewer"]

log = logging.getLogger(__name__)

R = TypeVar("R")


class JobLease:
    """One job's lease for one leadership term, on ``store``: every call carries ``epoch``, the
    term's job epoch (a group member's table epochs go with an acquire's ``owners``).
    ``enabled`` False: the store has no lease API (found by a call, or by the term that passed it
    on), and every call does nothing."""

    def __init__(
        self, store: SnapshotLease, lease_id: str, epoch: JobEpoch, duration_ms: int, *, enabled: bool = True
    ) -> None:
        if not lease_id:
            raise ValueError("lease_id is empty")
        if epoch < 0:
            raise ValueError(f"lease {lease_id}: epoch must be >= 0, got {epoch}")
        if duration_ms <= 0:
            raise ValueError(f"lease {lease_id}: duration_ms must be > 0, got {duration_ms}")
        self.store = store
        self.lease_id = lease_id
        self.epoch = epoch
        self.duration_ms = duration_ms
        self.enabled = enabled
        #: when the lease expires unless renewed (epoch ms): ``duration_ms`` after this driver sent
        #: the last acquire, renewal or claim the store took, so never later than the store's own
        #: expiry; None before the first and after a drop (the lease-expiry metric reads it)
        self.expires_at_ms: int | None = None

    def acquire(self, refs: Sequence[SnapshotRef], owners: TableClaims | None = None) -> list[SnapshotRef]:
        """Hold ``refs`` (creating or renewing the lease); returns the ones whose files are
        already gone: plan those buckets from a newer snapshot. ``owners``: in a tiering group, the
        table epochs of their tables (TableEpochFencedError when one of them moved)."""
        if not self.enabled:
            return []
        return self._call(
            lambda: self.store.acquire(self.lease_id, self.epoch, self.duration_ms, refs, owners), [], extends=True
        )

    def release_table(self, table_id: int, buckets: list[int]) -> None:
        """:meth:`release` of one table's buckets."""
        self.release({table_id: buckets})

    def release(self, held: Mapping[int, Iterable[int]]) -> None:
        """Let the store collect the snapshots held for these buckets, ``table_id -> buckets``,
        in one call however many tables a round had (when, and why then: :mod:`tiering.lease.holds`).
        An expired lease holds nothing: nothing left to release."""
        if not self.enabled:
            return
        buckets = [BucketId(table_id, b) for table_id, chosen in sorted(held.items()) for b in sorted(chosen)]
        if not buckets:
            return
        try:
            self._call(lambda: self.store.release(self.lease_id, self.epoch, buckets), None)
        except LeaseNotFoundError:
            log.debug(
                "lease %s: release of table_ids %s found no lease (expired or dropped)", self.lease_id, sorted(held)
            )

    def renew(self) -> bool:
        """Extend the lease; False when the store no longer knows it (its holds are gone)."""
        if not self.enabled:
            return True
        try:
            self._renew()
        except LeaseNotFoundError:
            return False
        return True

    def claim(self) -> None:
        """Renew the kept lease with this term's epoch as the term starts. The store refuses a
        lease call whose epoch is below the lease's, but it learns a new epoch only from a call:
        until this one, a previous leader that comes back as a zombie could still release or
        acquire holds (up to a third of the lease later, when the renewer first runs, or longer
        when no snapshot is read). An unknown lease has nothing to take over: the first acquire
        creates it with this epoch. A store out of reach is logged: the renewer and the
        round's acquires carry the epoch as soon as it answers. A store without the lease API
        turns the lease off."""
        if not self.enabled:
            return
        try:
            self._renew()
        except RetryableError as e:
            log.warning(
                "lease %s: could not claim it for epoch %d at the term's start: %s", self.lease_id, self.epoch, e
            )
            return
        except NotFoundError:
            return
        if self.enabled:
            log.info("lease %s: claimed for epoch %d", self.lease_id, self.epoch)

    def drop(self) -> None:
        """End the lease on a clean stop; already gone counts as dropped."""
        if not self.enabled:
            return
        try:
            self._call(lambda: self.store.drop(self.lease_id, self.epoch), None)
        except LeaseNotFoundError:
            log.debug("lease %s: already gone when dropped", self.lease_id)
        self.expires_at_ms = None

    def held(self) -> list[BucketId] | None:
        """The buckets the store holds for this lease right now (none when it is unknown or
        expired, or the lease is off); None: the store cannot list a lease's holds."""
        nothing: list[BucketId] | None = []
        if not self.enabled:
            return nothing
        return self._call(lambda: self.store.held(self.lease_id), nothing)

    def _renew(self) -> None:
        self._call(lambda: self.store.renew(self.lease_id, self.epoch, self.duration_ms), None, extends=True)

    def _call(self, verb: Callable[[], R], off: R, *, extends: bool = False) -> R:
        """``verb()``; a store without the lease API turns the lease off and answers ``off``.
        ``extends``: a call the store takes holds the lease for ``duration_ms`` from when it was sent."""
        sent_ms = int(time.time() * 1000)
        try:
            answer = verb()
        except LeaseUnsupportedError as e:
            self._turn_off(e)
            return off
        if extends:
            self.expires_at_ms = sent_ms + self.duration_ms
        return answer

    def _turn_off(self, answer: LeaseUnsupportedError) -> None:
        self.enabled = False
        self.expires_at_ms = None
        log.warning(
            "lease %s: %r has no lease API (%s); job tiers WITHOUT snapshot leases this term: "
            "the store's GC may delete a snapshot while a bootstrap reads it, and that table's round then fails "
            "(snapshot_gone) and bootstraps again from a newer snapshot",
            self.lease_id,
            self.store,
            answer.__cause__ or answer,
        )


class LeaseRenewer:
    """Renews a :class:`JobLease` every ``duration / 3`` on a daemon thread until stopped.

    Two renewals may fail in a row before the lease lapses. A renewal that finds the lease
    expired logs a warning and tells ``after`` (``after(renewed)`` follows every renewal that got
    an answer): the round in flight holds its snapshots again there, and releases the store
    refused earlier are sent again, so an idle job does not pin them
    (:class:`~tiering.lease.holds.SnapshotHolds`). Nothing trusts a hold without re-acquiring
    it (the committer re-acquires every snapshot right before reading it). A store outage first
    blocks one renewal inside the client's retry policy (``STORE_RETRY``), then is logged and
    retried on the next tick; leases much shorter than that policy's deadline can lapse during
    an outage.
    Anything else (a fenced epoch above all) ends the thread and is re-raised by
    :meth:`check` in the caller's thread: the renewer never swallows it.
    """

    def __init__(
        self, lease: JobLease, interval_s: float | None = None, *, after: Callable[[bool], None] = lambda renewed: None
    ) -> None:
        self.lease = lease
        self._after = after
        self.interval_s = interval_s if interval_s is not None else lease.duration_ms / 3000
        if self.interval_s <= 0:
            raise ValueError(f"lease {lease.lease_id}: renew interval must be > 0, got {self.interval_s}")
        self.renewals = 0
        self.failure: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-renewer-{lease.lease_id}", daemon=True)

    def start(self) -> LeaseRenewer:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def check(self) -> None:
        """Re-raise what ended the renewer (e.g. FencedEpochError); call it every round."""
        if self.failure is not None:
            raise self.failure

    def __enter__(self) -> LeaseRenewer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                renewed = self.lease.renew()
                if not renewed:
                    log.warning(
                        "lease %s: expired or unknown at renewal (epoch %s); its snapshot holds are gone "
                        "until acquired again",
                        self.lease.lease_id,
                        self.lease.epoch,
                    )
                self._after(renewed)
            except RetryableError as e:
                log.warning("lease %s: renewal failed, retrying in %.1fs: %s", self.lease.lease_id, self.interval_s, e)
                continue
            except Exception as e:  # handed to the caller's thread by check()
                log.error("lease %s: renewer stopped: %r", self.lease.lease_id, e)
                self.failure = e
                return
            if renewed:
                self.renewals += 1
