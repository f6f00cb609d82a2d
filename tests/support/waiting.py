"""Waiting for something another process or thread does; a wait that times out fails the test
naming what it waited for and how long."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: The store's own effects (a GC pass, a renewal, a periodic snapshot) come within seconds, and a
#: test may look for one state between two (snapshot 2 before 3): wait less, look often.
STORE_PACE = {"timeout_s": 15.0, "interval_s": 0.05}


def wait_until(
    predicate: Callable[[], T], what: str = "condition", *, timeout_s: float = 60.0, interval_s: float = 0.5
) -> T:
    """``predicate()``'s first truthy value, looked for every ``interval_s`` for ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(interval_s)
