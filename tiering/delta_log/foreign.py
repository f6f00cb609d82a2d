"""Commits of other writers in a tiered table: which of them changed its rows.

Failure mode this guards against: someone appends to, deletes from or restores a tiered table
with another tool (delta-rs, Spark). The lake then holds rows the store does not (or lacks rows
it has), and the job's next round, planned from the offsets of its own last commit, writes on
top of them: the lake diverges from the store for good, with nothing to say so. Such a commit
is told apart by its log entry: no ``txn`` of the job (every round commit carries one,
``tiering/<job>/<table>``; only round commits carry the ``kvTiering`` entry) and an ``add`` or
``remove`` action with ``dataChange = true``. A commit that changes no row is fine: an
OPTIMIZE (its actions say ``dataChange = false``), a vacuum, a property or a comment.

Only commits newer than the table's newest round commit can be foreign: the job's own commits
after a round are maintenance commits, none of which changes data. A table holding no round
commit is not looked at: the job has no position in it yet, and one made by hand where a table
would land fails on its schema or partitioning instead. The log entries are read
once each (:class:`~tiering.delta_log.lake.LakeTables` looks only at versions it has not seen),
and not at all while the newest commit is a round's.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from tiering.delta_log.log_entries import read_entry
from tiering.objectstore.object_store import ObjectStore

__all__ = ["ForeignCommit", "first_foreign_change", "is_data_change"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ForeignCommit:
    """A commit of another writer that changed the table's rows: its version and operation."""

    version: int
    operation: str


def is_data_change(actions: Iterable[dict]) -> bool:
    """Whether a log entry's actions add or remove a file as a change of data (not a rewrite of
    the same rows, as a compaction's are)."""
    for action in actions:
        for kind in ("add", "remove"):
            body = action.get(kind)
            if isinstance(body, dict) and body.get("dataChange", True):
                return True
    return False


def first_foreign_change(store: ObjectStore, table_uri: str, versions: range) -> ForeignCommit | None:
    """The oldest of ``versions`` whose log entry changed data (none of them is a round commit:
    the caller passes only versions after the newest one). An entry already removed by log
    cleanup is older than a checkpoint and cannot be looked at: it is passed over."""
    for version in versions:
        try:
            actions = read_entry(store, table_uri, version)
        except FileNotFoundError:
            log.debug("%s: log entry %d cleaned up: not checked for other writers", table_uri, version)
            continue
        if is_data_change(actions):
            info: dict = next((a["commitInfo"] for a in actions if isinstance(a.get("commitInfo"), dict)), {})
            return ForeignCommit(version, str(info.get("operation", "unknown operation")))
    return None
