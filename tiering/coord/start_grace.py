"""How long a group member waits for its peers before its first assignment (docs/DESIGN.md §7).

Failure mode it prevents: startup churn. Members of a group are started together, but each joins
when its own leader wins, a moment apart; the first to join would take every table and give most of
them back milliseconds later, each move costing a table epoch bump and, at the table's next round,
a Delta fence commit. So the first assignment waits until the membership has been quiet for
``quiet_s`` and every member expected (the jobs the table epoch znodes name as owners: they ran
before) has joined, and never longer than ``max_s`` after joining: a member alone starts after
``quiet_s``, or ``max_s`` when a peer it expects never comes back. After the first assignment,
membership changes are acted on at once (coord/rebalancer.py).

Pure: the caller measures the times and reads the members.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass

__all__ = ["StartGrace"]


@dataclass(frozen=True)
class StartGrace:
    """The wait before a member's first assignment: ``quiet_s`` of unchanged membership with every
    expected member present, at most ``max_s``."""

    quiet_s: float
    max_s: float

    def __post_init__(self) -> None:
        if not 0 <= self.quiet_s <= self.max_s:
            raise ValueError(f"start grace: need 0 <= quiet_s <= max_s, got {self.quiet_s} and {self.max_s}")

    @classmethod
    def of_session(cls, session_timeout_s: float) -> StartGrace:
        """The grace for a ZooKeeper session timeout: at most one session timeout (a peer's
        previous session may hold its member node that long), quiet for a fifth of it."""
        return cls(quiet_s=session_timeout_s / 5, max_s=session_timeout_s)

    def remaining(self, *, waited_s: float, quiet_s: float, members: Set[str], expected: Set[str]) -> float:
        """Seconds still to wait (0: assign now). ``waited_s``: since joining; ``quiet_s``: since
        the membership last changed; ``members``: the live members' jobs; ``expected``: the jobs
        expected to join."""
        left = self.max_s - waited_s
        if left <= 0:
            return 0.0
        if not expected <= members:
            return left
        return max(0.0, min(self.quiet_s - quiet_s, left))
