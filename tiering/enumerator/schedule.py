"""Which tables with changes a round plans: those whose freshness target asks for it.

Failure modes it exists for: a job (or a member of a tiering group) with many quiet tables and a
few hot ones spending every round on all of them — each changed table costs its round a Delta
commit, a lake report and the driver's time, so the hot tables wait on tables nobody needs fresh —
and, the other way, a table held back until it misses its target, or starves.

The rule (docs/DESIGN.md §5). A table is *scheduled* when ``[tables] freshness_targets`` gives it a
target (by name or pattern); any other table, one under ``freshness_target_s`` alone included, is
planned at every trigger that finds it changed, so nothing changes until targets are set (with
none, the source keeps no schedule at all; nor does an availableNow run, which tiers everything
there is, then ends). A scheduled table with changes is planned at a trigger when::

    (now - clean_at) + gap >= PLAN_AT_FRACTION * target

``clean_at`` is the latest time the lake is known to have held every write the store had (so any
write the lake lacks is younger than ``now - clean_at``); ``gap`` is how long the next trigger may
take to come: the trigger interval, or the longest of the recent gaps between triggers when longer
(a slow round delays the trigger after it). A table held back at one trigger is thus planned at
the latest at the last trigger before its lake would get older than that fraction of its target;
the rest of the target is left for the round that writes it.

Planned at once, whatever its target:

- a table this process knows nothing of: a new term or planning process (which plans from the
  lake's positions), a table first seen, dropped and re-created (a new table id), or newly owned
  in a group (a new table epoch): its lake may lack writes of any age;
- a table whose last planned round did not bring its lake to the log ends it was planned up to:
  the round failed, a read limit admitted only part of it, or a snapshot went before it was
  leased; it is behind by more than its clean time says.

What the decision spares: a held-back table's Delta log is not read and its snapshots are not
asked for, and it takes no lease hold (the round's acquire comes after the decision). A table with
a planned round in flight is read again at the next trigger, once, to learn whether that round
landed. The class is fed the trigger's time and the lake's position as values; it reads no clock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from tiering.enumerator.positions import LakePosition

__all__ = ["PLAN_AT_FRACTION", "Identity", "TableClock", "FreshnessSchedule", "plan_now"]

#: The share of its target a scheduled table's lake may age before a trigger plans it. The other
#: half covers the round that writes it, a trigger that comes late, and one failed round retried.
PLAN_AT_FRACTION = 0.5

#: How many recent gaps between triggers bound the next one: enough to follow rounds that stay
#: slow, few enough that a one-off slow round (a bootstrap, a maintenance pass) does not keep
#: every scheduled table due for long.
RECENT_GAPS = 3

#: What tells one incarnation of a table from another: its table id and, in a group, its table epoch.
Identity = tuple[int, int | None]


def plan_now(*, target_s: float | None, clean_at: float | None, now: float, gap_s: float) -> bool:
    """Whether a table with changes is planned at the trigger at ``now``: always without a target
    of its own or without a known clean time, else when its lake would otherwise get older than
    :data:`PLAN_AT_FRACTION` of the target before the next trigger, ``gap_s`` away."""
    if target_s is None or clean_at is None:
        return True
    return (now - clean_at) + gap_s >= PLAN_AT_FRACTION * target_s


@dataclass(frozen=True)
class TableClock:
    """What the planning process knows of one table's lake, in the trigger clock's seconds.

    ``clean_at``: the lake held every write the store had then (None: unknown). ``settled``: it
    still did at the last trigger. ``planned_at``: a round was planned then, up to
    ``planned_ends`` (bucket -> log end; None when the round admitted only part of the table).
    """

    identity: Identity
    clean_at: float | None = None
    settled: bool = False
    planned_at: float | None = None
    planned_ends: Mapping[int, int] | None = field(default=None, hash=False)


class FreshnessSchedule:
    """The planning process's memory of its tables' clean times, keyed by name, and the rule
    applied to them (:func:`plan_now`). Each trigger starts with :meth:`trigger`; the planning
    threads then each ask about their own tables (an entry is replaced whole)."""

    def __init__(self, interval_s: float) -> None:
        self._interval_s = interval_s
        self._clocks: dict[str, TableClock] = {}
        self._gaps: deque[float] = deque(maxlen=RECENT_GAPS)
        self._now: float | None = None
        self._previous: float | None = None
        self._held: dict[str, float] = {}

    def trigger(self, now: float) -> None:
        """A trigger at ``now`` starts: what the previous one held back is forgotten."""
        if self._now is not None:
            self._gaps.append(now - self._now)
        self._previous, self._now = self._now, now
        self._held = {}

    @property
    def gap_s(self) -> float:
        """How long the next trigger may take to come."""
        return max(self._interval_s, *self._gaps) if self._gaps else self._interval_s

    @property
    def held(self) -> Mapping[str, float]:
        """The tables with changes this trigger held back -> seconds until they are due."""
        return self._held

    def caught_up(self, name: str, identity: Identity) -> None:
        """The lake was found holding every log end this trigger read for ``name``."""
        self._clocks[name] = TableClock(identity, clean_at=self._trigger_time(), settled=True)

    def due(self, name: str, identity: Identity, target_s: float | None) -> bool:
        """Before ``name``'s lake is read: False when its clean time says it can wait (it is then
        held back), True when it is due or its lake must be read to know."""
        clock = self._clock(name, identity)
        if clock is None or clock.planned_at is not None:
            return True
        if clock.settled:  # caught up until the last trigger, changed since
            clock = self._clocks[name] = replace(clock, clean_at=self._previous, settled=False)
        return self._decide(name, clock, target_s)

    def after_read(self, name: str, identity: Identity, lake: LakePosition | None, target_s: float | None) -> bool:
        """Once ``name``'s lake was read and found lacking writes: whether it is planned now. A
        round in flight is settled here: landed, its planning time becomes the clean time; not
        landed (failed, or planned in part), the table is due."""
        clock = self._clock(name, identity)
        if clock is None:
            return True
        if clock.planned_at is not None:
            if clock.planned_ends is None or not _holds(lake, identity[0], clock.planned_ends):
                return True
            clock = self._clocks[name] = replace(clock, clean_at=clock.planned_at, planned_at=None, planned_ends=None)
        return self._decide(name, clock, target_s)

    def planned(self, name: str, identity: Identity, ends: Mapping[int, int] | None) -> None:
        """A round was handed out with ``name`` planned up to ``ends`` (None: in part only)."""
        clock = self._clocks.get(name)
        clean_at = clock.clean_at if clock is not None and clock.identity == identity else None
        self._clocks[name] = TableClock(identity, clean_at, planned_at=self._trigger_time(), planned_ends=ends)

    def _decide(self, name: str, clock: TableClock, target_s: float | None) -> bool:
        now = self._trigger_time()
        if plan_now(target_s=target_s, clean_at=clock.clean_at, now=now, gap_s=self.gap_s):
            return True
        assert target_s is not None and clock.clean_at is not None  # plan_now is True otherwise
        self._held[name] = clock.clean_at + PLAN_AT_FRACTION * target_s - self.gap_s - now
        return False

    def _clock(self, name: str, identity: Identity) -> TableClock | None:
        """``name``'s clock, or None when unknown or of another incarnation (then forgotten)."""
        clock = self._clocks.get(name)
        if clock is not None and clock.identity != identity:
            del self._clocks[name]
            return None
        return clock

    def _trigger_time(self) -> float:
        if self._now is None:
            raise RuntimeError("FreshnessSchedule: trigger() must start every trigger")
        return self._now


def _holds(lake: LakePosition | None, table_id: int, ends: Mapping[int, int]) -> bool:
    """Whether the lake holds every log end of ``ends`` for this incarnation."""
    if lake is None or not lake.belongs_to(table_id):
        return False
    return all(lake.buckets.get(bucket, -1) >= end for bucket, end in ends.items())
