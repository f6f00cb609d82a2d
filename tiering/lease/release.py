"""When the job lets go of the snapshots its lease holds, and why there: the one home of release.

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
- **expiry** — the store's backstop, ``lease.duration_s`` after the last renewal. It covers
  what no code can: a driver killed mid-round, Spark's ``commit(end)`` that runs one batch
  late and never for a run's last batch, and ``stop()`` that Spark does not call on SIGTERM —
  which is why neither of those two source hooks releases anything.

A driver whose term is over (:class:`~tiering.errors.NotLeaderError`) releases nothing: the
store refuses its epoch and the new leader owns the holds.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from tiering.errors import NotLeaderError, TieringError
from tiering.lease.job_lease import JobLease

__all__ = ["LeaseReleases"]

log = logging.getLogger(__name__)


class LeaseReleases:
    """The release points above, for one term's :class:`JobLease`."""

    def __init__(self, lease: JobLease) -> None:
        self.lease = lease

    def finished(self, held: Mapping[int, Iterable[int]]) -> None:
        """The round's committed tables, ``table_id -> buckets``: one call for all of them."""
        self.lease.release(held)

    def failed(self, table_id: int, buckets: Iterable[int]) -> None:
        self.lease.release({table_id: buckets})

    def failed_over(self, unsettled: Mapping[int, Iterable[int]]) -> None:
        """Release every table of an aborted round (``table_id -> buckets``); best effort: the
        round's own error is what the caller raises, and expiry backs this up."""
        try:
            self.lease.release(unsettled)
        except NotLeaderError:
            return
        except TieringError as e:
            log.warning("lease %s: release of table_ids %s after an aborted round failed: %s",
                        self.lease.lease_id, sorted(unsettled), e)

    def stopped(self) -> None:
        self.lease.drop()
