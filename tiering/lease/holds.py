"""What the job's lease holds for the round in flight, and when it lets go of it: the one home of
release.

Failure mode: a hold kept longer than needed pins snapshots the store wants to collect (disk
grows, retention is defeated); a hold let go too early lets the store delete files a round is
about to read. Snapshot splits are leased by the source *before* they are handed out
(``KvTieringStreamReader.latestOffset``) and re-acquired by the committer right before their
files are read. They are let go at exactly these points (docs/DESIGN.md §1):

- **finished** — a table's round landed in Delta and its offsets were reported: the lake now
  holds what the snapshot held (``RoundCommitter``: one release for every table the round
  committed);
- **failed** — a table's round failed (schema mismatch, files gone, I/O): its buckets are
  re-planned next round, from a newer snapshot if need be; holding this one helps nobody
  (``RoundCommitter``, per table; the other tables still commit);
- **failed over** — the round's readers are gone as a whole (the micro-batch raised: a Spark
  job failure, lost executors): every table of the round that neither finished nor failed is
  released before the error stops the query; a replay re-acquires what it reads;
- **stopped** — a clean stop drops the whole lease (``TieringJob.stop``), but only while this
  driver still leads: a new leader uses the same lease id and the store would refuse our
  stale epoch anyway;
- **refused** — a release the store refused (a blip) is kept and sent again: at the next
  round's start and at every renewal (:meth:`SnapshotHolds.after_renewal`), so a job with
  nothing to tier does not pin those snapshots for as long as it idles;
- **unplanned** — a new term lets go of every hold no planned split needs
  (:meth:`SnapshotHolds.reconcile`): a driver killed after the planner's acquire and before
  Spark logged the offset left holds that no round will ever release, under a lease id every
  later term keeps renewing. A store that lists no lease's holds (Fluss) has every bucket of
  every table it lists released but the planned ones: a bucket not held is no error there;
- **expiry** — the store's backstop, ``lease.duration_s`` after the last renewal. It covers
  what no code can: a driver killed mid-round, Spark's ``commit(end)`` that runs one batch
  late and never for a run's last batch, and ``stop()`` that Spark does not call on SIGTERM —
  which is why neither of those two source hooks releases anything.

A driver whose term is over (:class:`~tiering.errors.NotLeaderError`) releases nothing: the
store refuses its epoch and the new leader owns the holds.

The round's threads and the renewer change the holds one store call at a time, each call made
with what this object knows when it is made: an acquire made with a stale copy of the round in
flight would hold a table that finished meanwhile again (and renewals would keep that hold for
the term), and a release sent again that lands after the next round's acquire of the same bucket
would let go of the hold that round reads under. A call the store is slow to answer holds up the
others for as long: they would be answered no sooner.

What the round in flight holds is known here too (:meth:`SnapshotHolds.hold`): when a renewal
finds the lease lapsed (a store paused past ``lease.duration_s``), those snapshots are acquired
again at once rather than read unheld; one found gone by then is :meth:`SnapshotHolds.lost`, and
the committer fails its table with cause ``snapshot_gone`` instead of committing what it read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence

from tiering.errors import NotLeaderError, StoreError, TieringError
from tiering.kvstore.contract import BucketId, SnapshotRef, StoreCatalog, StoreTable, TableClaims
from tiering.lease.job_lease import JobLease

__all__ = ["SnapshotHolds", "by_bucket", "without_buckets", "strays"]

log = logging.getLogger(__name__)


Held = Mapping[int, Iterable[int]]


def by_bucket(refs: Iterable[SnapshotRef | BucketId]) -> dict[int, set[int]]:
    """``table_id -> buckets`` of ``refs``: what a release names (it lets go of a bucket whole)."""
    buckets: dict[int, set[int]] = {}
    for ref in refs:
        buckets.setdefault(ref.table_id, set()).add(ref.bucket)
    return buckets


def without_buckets(held: Held, refs: Iterable[SnapshotRef]) -> dict[int, set[int]]:
    """``held`` less every bucket of ``refs``, whatever snapshot of it they name; tables left
    with no bucket are left out."""
    taken = by_bucket(refs)
    rest = {table_id: set(buckets) - taken.get(table_id, set()) for table_id, buckets in held.items()}
    return {table_id: buckets for table_id, buckets in rest.items() if buckets}


def strays(
    held: Iterable[BucketId] | None, tables: Callable[[], Iterable[StoreTable]], planned: Iterable[SnapshotRef]
) -> dict[int, set[int]]:
    """What a new term releases: the ``held`` buckets no ``planned`` snapshot is of; ``held`` None
    (a store that lists no holds): every bucket of every table the store has (``tables()``, asked
    only then) that no planned snapshot is of, since an earlier term may have left a hold on any."""
    if held is not None:
        return without_buckets(by_bucket(held), planned)
    return without_buckets({t.table_id: set(range(t.num_buckets)) for t in tables()}, planned)


class SnapshotHolds:
    """The snapshots one term's :class:`JobLease` holds for the round in flight (taken by
    :meth:`hold`), let go at the release points above, and what the store refused to release.
    Thread-safe: the round's threads and the lease renewer call it."""

    def __init__(self, lease: JobLease) -> None:
        self.lease = lease
        #: held across each store call that changes the holds (the module's docstring says why)
        self._calls = threading.Lock()
        #: held while the sets below are read or changed
        self._lock = threading.Lock()
        self._in_flight: set[SnapshotRef] = set()
        self._lost: set[SnapshotRef] = set()
        self._refused: dict[int, set[int]] = {}

    def hold(self, refs: Sequence[SnapshotRef], owners: TableClaims | None = None) -> list[SnapshotRef]:
        """Acquire the round's snapshots right before they are read; returns the ones already
        gone. The rest are the round in flight until released. A refused release of a bucket the
        round holds again is dropped: it would let go of the round's new hold. ``owners``: in a
        tiering group, the table epochs of their tables (TableEpochFencedError, nothing held,
        when one of them moved)."""
        with self._calls:
            gone = self.lease.acquire(refs, owners) if refs else []
            with self._lock:
                self._in_flight = set(refs) - set(gone)
                self._lost = set()
                self._refused = without_buckets(self._refused, self._in_flight)
        return gone

    def lost(self) -> frozenset[SnapshotRef]:
        """Snapshots of the round in flight found gone when the lapsed lease was acquired again."""
        with self._lock:
            return frozenset(self._lost)

    def finished(self, held: Held) -> None:
        """The round's committed tables, ``table_id -> buckets``: one call for all of them."""
        self._release(held, "after the commit")

    def failed(self, table_id: int, buckets: Iterable[int]) -> None:
        self._release({table_id: buckets}, "of a failed table")

    def failed_over(self, unsettled: Held) -> None:
        """Release every table of an aborted round (``table_id -> buckets``) and every release
        still refused; best effort: the round's own error is what the caller raises, and expiry
        backs this up."""
        with self._calls:
            held = self._take_refused()
            for table_id, buckets in unsettled.items():
                held.setdefault(table_id, set()).update(buckets)
            self._forget(held)
            try:
                self.lease.release(held)
            except NotLeaderError:
                return
            except TieringError as e:
                log.warning(
                    "lease %s: release of table_ids %s after an aborted round failed: %s",
                    self.lease.lease_id,
                    sorted(held),
                    e,
                )

    def retry_refused(self) -> None:
        """Send the releases the store refused, in one call; what it refuses again waits for the
        next try. :class:`NotLeaderError` propagates (the term is over)."""
        with self._calls:
            held = self._take_refused()
            sent = bool(held) and self._send(held, "refused before")
        if sent:
            log.info("lease %s: released table_ids %s, refused before", self.lease.lease_id, sorted(held))

    def after_renewal(self, renewed: bool) -> None:
        """The renewer's tick: a lapsed lease holds the round in flight's snapshots again, and
        the refused releases are sent."""
        if not renewed:
            self._hold_again()
        self.retry_refused()

    def reconcile(self, planned: Iterable[SnapshotRef], catalog: StoreCatalog) -> None:
        """A new term's start: release every hold of the lease that no planned split needs
        (``planned``: the snapshot splits of the round Spark will replay, if any; :func:`strays`,
        the tables from ``catalog`` where the store lists no holds). Buckets are released whole,
        so a bucket with a planned snapshot keeps all of its holds."""
        with self._calls:
            held = self.lease.held()
            stray = strays(held, catalog.tables, planned)
            if not stray:
                return
            self.lease.release(stray)
        line = (
            "lease %s: released %d holds no planned round needs (table_ids %s), left by an earlier term"
            if held is not None
            else "lease %s: released the %d buckets no planned round needs (table_ids %s): the store lists no "
            "holds, and an earlier term may have left one on any"
        )
        log.info(line, self.lease.lease_id, sum(map(len, stray.values())), sorted(stray))

    def stopped(self) -> None:
        with self._calls:
            self.lease.drop()

    def _release(self, held: Held, what: str) -> None:
        as_sets = {table_id: set(buckets) for table_id, buckets in held.items()}
        with self._calls:
            self._forget(as_sets)
            self._send(as_sets, what)

    def _send(self, held: dict[int, set[int]], what: str) -> bool:
        """One release; one the store refuses is kept for :meth:`retry_refused` (False)."""
        try:
            self.lease.release(held)
        except StoreError as e:  # a NotLeaderError, which is none, goes up: the term is over
            log.warning(
                "lease %s: release %s refused for table_ids %s (sent again at the next renewal or round): %s",
                self.lease.lease_id,
                what,
                sorted(held),
                e,
            )
            self._refuse(held)
            return False
        return True

    def _hold_again(self) -> None:
        with self._calls:
            with self._lock:
                refs = sorted(self._in_flight, key=lambda r: (r.table_id, r.bucket, r.snapshot_id))
            if not refs:
                return
            gone = set(self.lease.acquire(refs))
            with self._lock:
                self._lost |= gone & self._in_flight
                self._in_flight -= gone
        log.warning(
            "lease %s lapsed: acquired the %d snapshots of the round in flight again%s",
            self.lease.lease_id,
            len(refs),
            f"; {len(gone)} already gone, their tables fail (snapshot_gone)" if gone else "",
        )

    def _forget(self, held: Held) -> None:
        """Released buckets are no longer the round in flight's."""
        with self._lock:
            self._in_flight = {r for r in self._in_flight if r.bucket not in held.get(r.table_id, ())}

    def _refuse(self, held: Held) -> None:
        with self._lock:
            for table_id, buckets in held.items():
                self._refused.setdefault(table_id, set()).update(buckets)

    def _take_refused(self) -> dict[int, set[int]]:
        with self._lock:
            held, self._refused = self._refused, {}
        return held
