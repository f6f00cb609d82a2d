"""A job's membership in its tiering group, and the tables it owns there (docs/DESIGN.md §7).

Failure modes: a member whose ``[tables]`` selection differs from the group's (members would
balance different table sets and never agree on an assignment) — refused at join, naming both
selections; a member that dies or freezes — its ephemeral node goes with its session, the others
see the membership change and take its tables, each after bumping the table's epoch, so whatever
the frozen member sends when it wakes up is refused where it lands; two members briefly disagreeing
on the membership — both may bump one table's epoch, the higher wins everywhere and the other finds
out at its next rebalance or write.

The membership is a kazoo ``Party`` under ``/tiering/groups/<group>/members`` (one ephemeral node
per member's leader, holding its job, selection, host and pid; the node's creation time says since
when it is a member); the assignment is coord/assignment.py's pure function over the members, the
selected tables, their weights and the current owners read from the table epoch znodes
(coord/table_epochs.py). The children watch only sets :attr:`GroupMember.changed`; the
rebalance runs in the thread that waits for it.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.recipe.party import Party
from kazoo.recipe.watchers import ChildrenWatch

from tiering.conf.model import TablesConfig
from tiering.coord.assignment import assign
from tiering.coord.client import close_quietly, connect
from tiering.coord.epoch import Epoch
from tiering.coord.ownership import OwnedTables
from tiering.coord.paths import ensure_group_znodes, members_path
from tiering.coord.table_epochs import TableHolder, bump_table_epoch, read_table_epochs
from tiering.epochs import TableEpoch
from tiering.errors import ConfigError, CoordinationError

__all__ = ["GroupMember", "GroupView", "MemberRecord", "read_group", "selection_of"]

log = logging.getLogger(__name__)


def selection_of(tables: TablesConfig) -> dict[str, list[str]]:
    """What picks a member's tables, in a form two members compare equal on when they pick the
    same (pattern order and repeats do not change the selection)."""
    return {"include": sorted(set(tables.include)), "exclude": sorted(set(tables.exclude))}


class GroupMember:
    """A job's leader in its group: :meth:`join`, then :meth:`rebalance` whenever :attr:`changed`
    is set or the selected tables change, :meth:`leave` at the end of the term."""

    def __init__(self, zk: KazooClient, group: str, job: str, job_epoch: Epoch, tables: TablesConfig) -> None:
        self.zk = zk
        self.group = group
        self.job = job
        self._job_epoch = job_epoch
        self._selection = selection_of(tables)
        record = {"job": job, "selection": self._selection, "host": socket.gethostname(), "pid": os.getpid()}
        self._party = Party(zk, members_path(group), identifier=json.dumps(record))
        #: set by the membership watch; cleared by :meth:`rebalance`
        self.changed = threading.Event()
        self._ownership = OwnedTables(group, job)

    @property
    def ownership(self) -> OwnedTables:
        return self._ownership

    def join(self) -> None:
        """Register in the group; ConfigError (before registering) when another member selects
        other tables than this job does."""
        self.check_selection()
        try:
            self._party.join()
        except KazooException as e:
            raise CoordinationError(f"job {self.job!r} cannot join group {self.group!r}: {e!r}") from e
        ChildrenWatch(self.zk, members_path(self.group), self._on_members)
        log.info("job=%s joined group %s", self.job, self.group)

    def check_selection(self) -> None:
        """ConfigError when a live member selects other tables than this job does."""
        ensure_group_znodes(self.zk, self.group)
        for other in _member_records(self.zk, self.group):
            if other.job != self.job and other.selection != self._selection:
                raise ConfigError(
                    [
                        f"tables: job {self.job!r} selects {self._selection}, but job {other.job!r} of group "
                        f"{self.group!r} selects {other.selection}: every member of a group selects the same "
                        "tables"
                    ]
                )

    def _on_members(self, children: list[str]) -> bool:
        self.changed.set()
        return self._party.participating

    def leave(self) -> None:
        """Leave the group (the session's end does it too); the others take the tables."""
        try:
            self._party.leave()
        except KazooException as e:
            log.warning("job=%s could not leave group %s (its session's end will): %r", self.job, self.group, e)

    def members(self) -> list[str]:
        """The jobs of the group's live members, sorted (a job whose previous session has not
        expired yet counts once)."""
        return sorted({record.job for record in _member_records(self.zk, self.group)})

    def owners(self, tables: list[str]) -> set[str]:
        """The jobs the table epoch znodes of ``tables`` name as owners (live members or not)."""
        return {owned.job for owned in read_table_epochs(self.zk, self.group, tables).values()}

    def rebalance(self, tables: list[str], weights: Mapping[str, int] | None = None) -> OwnedTables:
        """Compute the group's assignment of ``tables`` (by ``weights`` where known, else by count:
        coord/assignment.py) and take this job's share: the table epoch of every table newly given
        to it is bumped before it is returned as owned; a table given to another member, or whose
        epoch another member bumped meanwhile, is no longer owned."""
        self.changed.clear()
        members = self.members()
        if self.job not in members:
            raise CoordinationError(f"job {self.job!r} is not a member of group {self.group!r} (session expired?)")
        found = read_table_epochs(self.zk, self.group, tables)
        owners = assign(tables, members, {table: owned.job for table, owned in found.items()}, weights)
        kept: dict[str, TableEpoch] = {}
        for table, epoch in self._ownership.tables.items():
            now = found.get(table)
            if owners.get(table) == self.job and now is not None and (now.job, now.epoch) == (self.job, epoch):
                kept[table] = epoch
            else:
                owner = f"job {now.job!r} at table epoch {now.epoch}" if now is not None else "no one"
                log.info("group=%s table=%s moves away from job %s (now: %s)", self.group, table, self.job, owner)
        for table in sorted(t for t, member in owners.items() if member == self.job and t not in kept):
            kept[table] = bump_table_epoch(self.zk, self.group, table, self.job, self._job_epoch).epoch
        self._ownership = OwnedTables(self.group, self.job, kept)
        return self._ownership


@dataclass(frozen=True)
class MemberRecord:
    """One live member node: the job, the selection it joined with, where its leader runs (None
    from a member that did not say) and since when (the node's creation, ZooKeeper's clock)."""

    job: str
    selection: dict | None
    host: str | None
    pid: int | None
    since_ms: int


@dataclass(frozen=True)
class GroupView:
    """A group as ``tiering status`` and ``tiering group`` show it: its live member nodes, the
    selected tables and each one's owner (a table no member ever owned has none)."""

    group: str
    records: list[MemberRecord] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    owners: dict[str, TableHolder] = field(default_factory=dict)

    @property
    def members(self) -> list[str]:
        """The live members' jobs, sorted, each once."""
        return sorted({r.job for r in self.records})

    def as_dict(self) -> dict:
        """The status's group section: the members' jobs and each table's owner and table epoch."""
        return {
            "group": self.group,
            "members": self.members,
            "owners": {t: {"job": o.job, "table_epoch": o.epoch} for t, o in sorted(self.owners.items())},
        }

    def listing(self) -> dict:
        """``tiering group``'s answer: each member node (oldest first) with the tables it owns at
        their table epochs, and the selected tables no live member owns, each with the job that
        owned it last (None: never owned) — a departed member's, until the others take them."""
        live = set(self.members)
        members = [
            {
                "job": r.job,
                "host": r.host,
                "pid": r.pid,
                "since_ms": r.since_ms,
                "tables": {t: o.epoch for t, o in sorted(self.owners.items()) if o.job == r.job},
            }
            for r in sorted(self.records, key=lambda r: (r.since_ms, r.job))
        ]
        last = {t: self.owners[t].job if t in self.owners else None for t in sorted({*self.tables, *self.owners})}
        unassigned = {t: job for t, job in last.items() if job not in live}
        return {"group": self.group, "members": members, "unassigned": unassigned}


def read_group(hosts: str, group: str, tables: list[str], *, timeout_s: float = 10.0) -> GroupView:
    """The live members of ``group`` and the owners of ``tables``, read-only with a session of its
    own (it joins nothing)."""
    zk = connect(hosts, session_timeout_s=max(timeout_s, 2.0), timeout_s=timeout_s)
    try:
        return GroupView(group, _member_records(zk, group), sorted(tables), read_table_epochs(zk, group, tables))
    finally:
        close_quietly(zk)


def _member_records(zk: KazooClient, group: str) -> list[MemberRecord]:
    """What each live member node of ``group`` holds, and when it was made (none before the
    group's first member: the path is not created by reading)."""
    path = members_path(group)
    try:
        children = zk.get_children(path) if zk.exists(path) is not None else []
        answers = [zk.get_async(f"{path}/{child}") for child in children]
        records = []
        for answer in answers:
            try:
                data, stat = answer.get()
            except NoNodeError:  # left between the listing and the read
                continue
            record = json.loads(data)
            records.append(
                MemberRecord(record["job"], record.get("selection"), record.get("host"), record.get("pid"), stat.ctime)
            )
    except (KazooException, ValueError, KeyError, TypeError) as e:
        raise CoordinationError(f"cannot read the members of group {group!r} at {path}: {e!r}") from e
    return records
