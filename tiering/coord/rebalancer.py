"""Keeps a group member's ownership current while its leader leads (docs/DESIGN.md §7).

Failure modes: a member that stops noticing membership changes (it would keep tiering tables the
group gave away — fenced where it writes, but its rounds of them would all fail) — the membership
watch wakes the rebalance at once, and it also runs every ``every_s`` for tables created or
dropped upstream; ZooKeeper or the store failing a rebalance — the last ownership stays (its
tables are still this member's until their epochs move, and any write of one that moved is
refused), a warning is logged and the next wake-up tries again; a term that ended — the bump
under its stale job epoch is refused (FencedEpochError) and the rebalancer stops, leaving the
term's end to the leader loop.

The rebalance runs in this module's own thread: the watch only sets the member's event. The first
one waits out a start grace (coord/start_grace.py), so that members started together do not hand
tables to each other as they join one by one.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from tiering.coord.group import GroupMember
from tiering.coord.start_grace import StartGrace
from tiering.errors import NotLeaderError, TieringError

__all__ = ["GroupRebalancer"]

log = logging.getLogger(__name__)


class GroupRebalancer:
    """:meth:`start` joins the group and takes the first share (after the start ``grace``, if any);
    a thread then rebalances on every membership change and every ``every_s``; :meth:`stop` leaves.
    ``tables`` reads the selected tables at each rebalance, ``weights`` (if given) their weights
    (coord/assignment.py), which every member must read alike or nearly: a difference within the
    assignment's tolerance moves no table."""

    def __init__(
        self,
        member: GroupMember,
        tables: Callable[[], list[str]],
        every_s: float,
        grace: StartGrace | None = None,
        weights: Callable[[list[str]], Mapping[str, int]] | None = None,
    ) -> None:
        self._member = member
        self._tables = tables
        self._weights = weights
        self._every_s = every_s
        self._grace = grace
        self._stop = threading.Event()
        self._dir = Path(tempfile.mkdtemp(prefix=f"kv-tiering-{member.job}-"))
        #: the ownership file the planning process and the rounds read
        self.path = self._dir / "group-ownership.json"
        self._thread = threading.Thread(target=self._run, name=f"group-{member.group}", daemon=True)

    @property
    def started(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> GroupRebalancer:
        try:
            self._member.join()
            if self._grace is not None:
                self._settle(self._grace)
            self._rebalance()
        except BaseException:
            shutil.rmtree(self._dir, ignore_errors=True)
            raise
        self._thread.start()
        return self

    def _settle(self, grace: StartGrace) -> None:
        """Wait until the grace says to assign: the members it knows of have joined (the count
        configured, else the tables' owners so far and a quiet membership), or its end."""
        expected = self._member.owners(self._tables())
        joined = changed = time.monotonic()
        members = set(self._member.members())
        while True:
            now = time.monotonic()
            wait = grace.wait(waited_s=now - joined, quiet_s=now - changed, members=members, expected=expected)
            if wait.s <= 0:
                break
            self._member.changed.wait(wait.s)
            self._member.changed.clear()
            seen = set(self._member.members())
            if seen != members:
                members, changed = seen, time.monotonic()
        log.info(
            "job=%s group=%s: first assignment after a start grace of %.1fs, members %s: %s",
            self._member.job,
            self._member.group,
            time.monotonic() - joined,
            sorted(members),
            wait.why,
        )

    def _rebalance(self) -> None:
        before = set(self._member.ownership.tables)
        tables = self._tables()
        ownership = self._member.rebalance(tables, None if self._weights is None else self._weights(tables))
        ownership.write(self.path)
        if set(ownership.tables) != before:
            log.info(
                "job=%s group=%s owns %d tables (took %d, gave up %d)",
                self._member.job,
                self._member.group,
                len(ownership.tables),
                len(set(ownership.tables) - before),
                len(before - set(ownership.tables)),
            )

    def _run(self) -> None:
        while not self._stop.is_set():
            self._member.changed.wait(self._every_s)
            if self._stop.is_set():
                return
            try:
                self._rebalance()
            except NotLeaderError as e:
                log.error(
                    "job=%s group=%s: rebalancing stopped, the term is over: %s",
                    self._member.job,
                    self._member.group,
                    e,
                )
                return
            except (TieringError, OSError) as e:
                log.warning(
                    "job=%s group=%s: rebalance failed (the last ownership stays, tried again): %s",
                    self._member.job,
                    self._member.group,
                    e,
                )
                self._stop.wait(1.0)

    def stop(self) -> None:
        """Stop rebalancing and leave the group (the others take its tables)."""
        self._stop.set()
        self._member.changed.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        self._member.leave()
        shutil.rmtree(self._dir, ignore_errors=True)
