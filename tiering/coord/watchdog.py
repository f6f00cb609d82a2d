"""Declares leadership lost when the ZooKeeper session can no longer be trusted.

Failure mode it covers: kazoo reports LOST only after it reconnects and learns the session
expired. A leader cut off from ZooKeeper (server down, partition, this process frozen) stays
SUSPENDED meanwhile, possibly for ever, while the server may already have expired its session
and a standby may already lead. Like KIP-595's leader that cannot reach the quorum, a leader
SUSPENDED for longer than its session timeout steps down on its own: the timeout the server
granted (coord/client.py), which it expires the session by, not the one configured.

The kazoo state listener only records facts (when the suspension began, that LOST was seen)
and wakes the watchdog thread; the decision and the ``on_lost`` callback run in the watchdog's
own thread, never in kazoo's event thread (a blocking listener would stall every callback).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from tiering.coord.client import granted_timeout_s

__all__ = ["SessionWatchdog"]

log = logging.getLogger(__name__)


class SessionWatchdog:
    """Sets ``lost`` and calls ``on_lost(reason)`` once: on LOST, or SUSPENDED > ``grace_s``.

    ``grace_s`` defaults to the session timeout the server granted (read when a suspension is
    judged: a reconnection may have been granted another). kazoo suspends after 2/3 of it without
    an answer, so the leader steps down at most ~1.7 session timeouts after its last contact;
    writes in between are still refused by the epoch fence.
    """

    def __init__(
        self,
        zk: KazooClient,
        on_lost: Callable[[str], None] | None = None,
        *,
        grace_s: float | None = None,
        name: str = "zk-session-watchdog",
    ) -> None:
        self.zk = zk
        self._grace_s = grace_s
        self.on_lost = on_lost
        self.lost = threading.Event()
        self.reason: str | None = None
        self._suspended_at: float | None = None
        self._session_lost = False
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    @property
    def grace_s(self) -> float:
        """How long a suspension lasts before the session is given up."""
        return granted_timeout_s(self.zk) if self._grace_s is None else self._grace_s

    def start(self) -> SessionWatchdog:
        self.zk.add_listener(self._listener)
        # The listener only sees transitions from now on; take the current state as the first.
        self._listener(self.zk.state)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching without declaring anything lost. Safe from ``on_lost`` itself."""
        self._stopped.set()
        self._wake.set()
        self.zk.remove_listener(self._listener)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    def _listener(self, state: KazooState) -> None:
        if state == KazooState.LOST:
            self._session_lost = True
        elif state == KazooState.SUSPENDED:
            if self._suspended_at is None:
                self._suspended_at = time.monotonic()
        else:
            self._suspended_at = None
        self._wake.set()

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.clear()
            reason = self._verdict()
            if reason is not None:
                self._declare_lost(reason)
                return
            suspended_at = self._suspended_at
            timeout = None if suspended_at is None else max(0.0, suspended_at + self.grace_s - time.monotonic())
            self._wake.wait(timeout)

    def _verdict(self) -> str | None:
        if self._session_lost:
            return "ZooKeeper session expired (LOST)"
        suspended_at = self._suspended_at
        if suspended_at is not None:
            suspended_s, grace_s = time.monotonic() - suspended_at, self.grace_s
            if suspended_s >= grace_s:
                return f"disconnected from ZooKeeper for {suspended_s:.1f}s (> {grace_s:.1f}s session timeout)"
        return None

    def _declare_lost(self, reason: str) -> None:
        self.reason = reason
        self.lost.set()
        log.warning("leadership lost: %s", reason)
        self.zk.remove_listener(self._listener)
        if self.on_lost is not None:
            try:
                self.on_lost(reason)
            except Exception:
                log.exception("on_lost callback failed after: %s", reason)
