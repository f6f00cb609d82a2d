"""A committed table's lake report that the store refused, sent again next round.

Failure mode: a store blip right after a Delta commit landed. Failing the table then would
report a landed commit as failed; dropping the report would leave the store believing the lake
is behind (it keeps log segments it could delete and shows a lag that is not there) until the
table changes again. So it is kept here, per term, and sent first thing in the next round; a
report is superseded by a newer one of the same table. (A refused release is the lease's to
send again: :mod:`tiering.lease.holds`.) A store that takes no report
(:attr:`~tiering.kvstore.contract.PlanningStore.lake_progress` None, as Fluss) has none to keep.

A refusal that no retry can turn (409 ``OTHER_JOB``: another job's lake report holds the table,
docs/DESIGN.md §5) drops the report with an ERROR instead of sending it every round: the store
keeps the other job's lake as the table's, and the next round fails the table naming that job.
A report refused because its table moved to another member of the tiering group (409
``TABLE_EPOCH_FENCED``) is superseded and dropped with an INFO line: the new owner plans from the
lake, which holds the reported commit, and reports its own positions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from tiering.errors import NotFoundError, NotLeaderError, StoreError, TableMovedError
from tiering.kvstore.contract import LakeProgress

__all__ = ["DeferredEnds", "FINAL_REFUSALS"]

#: Error codes a lake report is refused with for good (the table is another job's).
FINAL_REFUSALS = frozenset({"OTHER_JOB"})

log = logging.getLogger(__name__)


class DeferredEnds:
    """Reports waiting for the next round (one term's; not thread-safe by design: the committer
    adds to it after its round's threads are done, and retries between rounds)."""

    def __init__(self) -> None:
        self.reports: dict[str, LakeProgress] = {}

    def add_report(self, table: str, report: LakeProgress) -> None:
        self.reports[table] = report

    def retry(self, report: Callable[[dict[str, LakeProgress]], Mapping[str, StoreError | None]]) -> None:
        """Send what waits, in one call; what the store refuses again waits for the round after. A
        table the store no longer has needs no report. :class:`NotLeaderError` propagates (the
        term is over)."""
        if self.reports:
            try:
                answers = report(dict(self.reports))
            except NotLeaderError:
                raise
            except StoreError as e:
                log.warning("tables %s: lake reports still refused: %s", sorted(self.reports), e)
                answers = {}
            for table, error in sorted(answers.items()):
                if isinstance(error, NotFoundError):
                    log.info("table=%s: lake report dropped, the store no longer has the table", table)
                elif isinstance(error, TableMovedError):
                    log.info(
                        "table=%s: lake report of Delta version %d superseded, not sent again: the table moved, its "
                        "new owner reports it: %s",
                        table,
                        self.reports[table].lake_version,
                        error,
                    )
                elif error is not None and error.code in FINAL_REFUSALS:
                    log.error(
                        "table=%s: lake report of Delta version %d dropped, the store refuses it for good: %s",
                        table,
                        self.reports[table].lake_version,
                        error,
                    )
                elif error is not None:
                    log.warning(
                        "table=%s: lake report of Delta version %d still refused: %s",
                        table,
                        self.reports[table].lake_version,
                        error,
                    )
                    continue
                del self.reports[table]
