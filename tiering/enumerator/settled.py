"""Tables the planner need not look at this round: the lake had all of their log, and the log
has not moved since.

Failure mode it exists for: a round's planning cost that grows with the number of tables the
job tiers rather than with the number that changed. Planning a table reads its Delta log and
asks the store for its snapshots; with 10,000 idle tables that is a minute a round for nothing.
The store's log ends of every table come in one call (``StoreCatalog.log_ends``); a table whose
log ends are the ones it had when the lake was last found holding all of them has nothing to tier,
and is skipped without reading anything. A table the planning process has not read yet (a query
starting) is settled on the store's word when its last lake report (``TableLog.reported``, where
the store keeps reports) reached every log end: the
store is told after each commit lands, so the lake holds at least that — the lake of the job that
made the report. Another job's report says nothing of this job's lake (two jobs tiering one table
into two lakes): it never settles a table (:func:`reported_position`); the table is read and
planned, and its round fails naming that job.

What could move the lake without moving the log (a table directory deleted by hand, a restore):
each entry is trusted for :data:`RECHECK_S` (plus a spread per table, so 10,000 tables settled
in one round are not all re-read in one round later), then the table is read again.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from tiering.enumerator.positions import LakePosition

if TYPE_CHECKING:
    from tiering.kvstore.contract import BucketLog, TableLog

#: A table's log ends as the store's :class:`~tiering.kvstore.contract.TableLog` holds them: by bucket.
Logs = Mapping[int, "BucketLog"]

__all__ = ["RECHECK_S", "Logs", "SettledTables", "caught_up", "reported_position"]

#: How long a settled table is skipped before its lake is read again (the spread adds up to as much).
RECHECK_S = 300.0

_Key = tuple[int, tuple[tuple[int, int, int], ...]]


def caught_up(table_id: int, logs: Logs, lake: LakePosition | None) -> bool:
    """Whether the lake holds every record of ``logs`` for this incarnation of the table."""
    if lake is None or not lake.belongs_to(table_id):
        return False
    return all(lake.buckets.get(bucket) == log.end for bucket, log in logs.items())


def reported_position(found: TableLog, job: str) -> LakePosition | None:
    """What the store's last lake report of ``found`` says ``job``'s lake holds: its offsets when
    the report is this job's (or names no job: an older client's), else nothing, as from a store
    that keeps no reports."""
    reported = found.reported
    if reported is None or not reported.offsets or reported.job not in (None, job):
        return None
    return LakePosition(found.table_id, reported.offsets)


class SettledTables:
    """The planning process's memory of caught-up tables, keyed by name (the planner's threads
    each record their own tables; an entry is replaced whole)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, recheck_s: float = RECHECK_S) -> None:
        self._clock = clock
        self._recheck_s = recheck_s
        #: name -> (its key, when it is due a re-check, the very ``logs`` it was recorded with: a
        #: store's 304 hands the same objects back, and comparing identities spares the keys)
        self._settled: dict[str, tuple[_Key, float, Logs]] = {}

    def __len__(self) -> int:
        return len(self._settled)

    def unchanged(self, name: str, table_id: int, logs: Logs) -> bool:
        """True when ``name`` was caught up with exactly these log ends and is not due a re-check."""
        entry = self._settled.get(name)
        if entry is None:
            return False
        key, until, seen = entry
        if (seen is not logs and key != _key(table_id, logs)) or self._clock() >= until:
            del self._settled[name]
            return False
        return True

    def record(self, name: str, table_id: int, logs: Logs, lake: LakePosition | None) -> bool:
        """Remember ``name`` as settled if the lake holds all of ``logs``; whether it did."""
        if not caught_up(table_id, logs, lake):
            self._settled.pop(name, None)
            return False
        spread = (zlib.crc32(name.encode()) % 1000) / 1000 * self._recheck_s
        self._settled[name] = (_key(table_id, logs), self._clock() + self._recheck_s + spread, logs)
        return True


def _key(table_id: int, logs: Logs) -> _Key:
    return table_id, tuple(sorted((bucket, log.start, log.end) for bucket, log in logs.items()))
