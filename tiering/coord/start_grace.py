"""How long a group member waits for its peers before its first assignment (docs/DESIGN.md §7).

Failure mode it prevents: startup churn. Members of a group are started together, but each joins
when its own leader wins and its query has started, seconds apart; the first to join would take
every table and give most of them back a moment later, each move costing a table epoch bump and,
at the table's next round, a Delta fence commit. So the first assignment waits, never longer than
``max_s`` after joining, for the members it knows of:

- the count a group is configured with (``[job] group_members``, like Kafka's
  ``group.initial.rebalance.delay.ms`` but ended by the count, not a timer): assign as soon as that
  many have joined. Only the operator knows it at a cold start, when no table has an owner yet;
- otherwise the jobs the table epoch znodes name as owners (they ran before), and then a membership
  quiet for ``quiet_s``: a member alone starts after ``quiet_s``, or ``max_s`` when a peer it
  expects never comes back. At a cold start nobody is named, so members joining further apart than
  ``quiet_s`` leave every table to the first.

After the first assignment, membership changes are acted on at once (coord/rebalancer.py).

Pure: the caller measures the times and reads the members.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass

__all__ = ["StartGrace", "GraceWait"]


@dataclass(frozen=True)
class GraceWait:
    """The grace's answer now: ``s`` seconds still to wait (0: assign now); ``why``: whom it
    waits or waited for, and, at 0, why it stops (the line the rebalancer logs once)."""

    s: float
    why: str


@dataclass(frozen=True)
class StartGrace:
    """The wait before a member's first assignment, at most ``max_s``: until ``members`` have
    joined when that count is known, else ``quiet_s`` of unchanged membership with every expected
    member present."""

    quiet_s: float
    max_s: float
    members: int | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.quiet_s <= self.max_s:
            raise ValueError(f"start grace: need 0 <= quiet_s <= max_s, got {self.quiet_s} and {self.max_s}")
        if self.members is not None and self.members < 1:
            raise ValueError(f"start grace: members must be at least 1, got {self.members}")

    @classmethod
    def of_session(
        cls, session_timeout_s: float, *, members: int | None = None, max_s: float | None = None
    ) -> StartGrace:
        """The grace for a ZooKeeper session timeout: at most ``max_s``, by default one session
        timeout (a peer's previous session may hold its member node that long), quiet for a fifth
        of the session timeout; waiting for ``members`` when given."""
        most = session_timeout_s if max_s is None else max_s
        return cls(quiet_s=min(session_timeout_s / 5, most), max_s=most, members=members)

    def wait(self, *, waited_s: float, quiet_s: float, members: Set[str], expected: Set[str]) -> GraceWait:
        """What to do now. ``waited_s``: since joining; ``quiet_s``: since the membership last
        changed; ``members``: the live members' jobs; ``expected``: the jobs the table epochs name
        as owners (ignored when the count is known: it says who is coming, owners of old included)."""
        left = max(0.0, self.max_s - waited_s)
        ran_out = "" if left else f" when {self.max_s:g}s ran out"
        if self.members is not None:
            counted = f"job.group_members = {self.members}: {len(members)} joined"
            return GraceWait(0.0, counted) if len(members) >= self.members else GraceWait(left, counted + ran_out)
        whom = f"the tables' owners {sorted(expected)}" if expected else "no table owned yet"
        if missing := sorted(expected - members):
            return GraceWait(left, f"{whom}: not joined: {missing}{ran_out}")
        rest = min(max(0.0, self.quiet_s - quiet_s), left)
        if rest:
            return GraceWait(rest, f"{whom}: waiting for the membership to be quiet for {self.quiet_s:g}s")
        quiet = "still changing" + ran_out if quiet_s < self.quiet_s else f"quiet for {self.quiet_s:g}s"
        hint = "" if expected else " (set job.group_members to wait for a new group's members)"
        return GraceWait(0.0, f"{whom}{' joined' if expected else ''}, membership {quiet}{hint}")
