"""Table epochs: the highest a tiering group's member has shown for a table, and which member that is.

Failure mode it prevents: a group member that lost a table (a frozen process that wakes up after
its ZooKeeper session expired, a member slow to notice a rebalance) reporting a lake offset or
acquiring snapshots for it after the new owner took over. The group's table epoch is bumped in
ZooKeeper before the new owner touches the table (coord/table_epochs.py); every call of the new
owner carries it, the store remembers the highest seen per table, and a call under a lower one is
refused with 409 ``TABLE_EPOCH_FENCED`` naming the newer owner. The same epoch from another job
is refused too: ZooKeeper's compare-and-set gives each epoch to one owner. Epochs compare within a
group only (each group counts its own); which group tiers a table is the lake report's rule
(lake_reports.py: one table, one group).

A table epoch fences one table, not a term: the refused member stops acting on that table only.
Releases are not fenced: a release lets go of the caller's own holds, which harms no one, and a
refused release would leave them pinned for as long as the caller renews its lease.
"""

from __future__ import annotations

import sqlite3
from typing import NamedTuple

from tiering.kvstore.server.errors import TABLE_EPOCH_FENCED, ApiError


class Owner(NamedTuple):
    """A table's owner as the store last saw it."""

    group: str
    job: str
    table_epoch: int


def find(conn: sqlite3.Connection, table_id: int) -> Owner | None:
    row = conn.execute("SELECT grp, job, table_epoch FROM table_owners WHERE table_id = ?", (table_id,)).fetchone()
    return Owner(row["grp"], row["job"], row["table_epoch"]) if row else None


def claim(conn: sqlite3.Connection, table_id: int, what: str, owner: Owner) -> None:
    """Remember ``owner`` as the table's, or raise 409 ``TABLE_EPOCH_FENCED`` when the store has seen
    a higher table epoch of the same group, or the same one from another job. ``what``: the refused
    call, named."""
    seen = find(conn, table_id)
    if (
        seen is not None
        and seen.group == owner.group
        and (seen.table_epoch > owner.table_epoch or (seen.table_epoch == owner.table_epoch and seen.job != owner.job))
    ):
        raise ApiError(
            409,
            TABLE_EPOCH_FENCED,
            f"{what} from job {owner.job!r} at table epoch {owner.table_epoch} refused: job {seen.job!r} of group "
            f"{seen.group!r} owns the table at table epoch {seen.table_epoch}",
        )
    conn.execute(
        "INSERT OR REPLACE INTO table_owners VALUES (?, ?, ?, ?)",
        (table_id, owner.group, owner.job, owner.table_epoch),
    )
