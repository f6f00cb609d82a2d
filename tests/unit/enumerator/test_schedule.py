"""The freshness schedule: which changed tables a trigger plans (tiering.enumerator.schedule).

The properties drive the schedule the way the planning process does (tiering/source.py): every
trigger starts with ``trigger``; a table found caught up is ``caught_up``; a changed one is asked
``due`` before its lake is read and ``after_read`` after; a planned one is ``planned`` up to the
log ends read. A planned round lands before the next trigger unless the test fails it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tiering.enumerator.positions import LakePosition
from tiering.enumerator.schedule import PLAN_AT_FRACTION, FreshnessSchedule, plan_now

pytestmark = pytest.mark.unit

IDENTITY = (7, None)


@dataclass
class Table:
    """One table under the schedule: its writes' times, the lake's offset (writes landed), and
    the staleness of its oldest unlanded write each time it was planned."""

    writes: list[float]
    target_s: float | None
    lake: int = 0
    settled: bool = False
    seen_end: int = -1
    planned_stale: list[float] = field(default_factory=list)
    planned_at: list[float] = field(default_factory=list)

    def end(self, now: float) -> int:
        return sum(1 for w in self.writes if w < now)


def run(table: Table, triggers: list[float], interval_s: float, failing: frozenset[int] = frozenset()) -> None:
    """Drive ``table`` through ``triggers``; rounds planned at the indexes in ``failing`` do not land."""
    schedule = FreshnessSchedule(interval_s)
    landing: int | None = None
    for k, now in enumerate(triggers):
        if landing is not None:
            table.lake, landing = landing, None
        schedule.trigger(now)
        end = table.end(now)
        if table.settled and end == table.seen_end:
            continue  # SettledTables.unchanged: skipped without asking anything
        table.settled, table.seen_end = False, end
        if not schedule.due("t", IDENTITY, table.target_s):
            continue
        if table.lake == end:
            schedule.caught_up("t", IDENTITY)
            table.settled = True
            continue
        if not schedule.after_read("t", IDENTITY, LakePosition(7, {0: table.lake}), table.target_s):
            continue
        table.planned_stale.append(now - table.writes[table.lake])
        table.planned_at.append(now)
        schedule.planned("t", IDENTITY, {0: end})
        if k not in failing:
            landing = end


WRITES = st.lists(st.floats(0, 200, allow_nan=False), max_size=60).map(sorted)
TARGETS = st.floats(0.5, 120, allow_nan=False)
GAPS = st.floats(0.2, 20, allow_nan=False)


def triggers_every(gap_s: float, until: float = 400) -> list[float]:
    return [i * gap_s for i in range(int(until / gap_s) + 1)]


@given(WRITES, TARGETS, GAPS)
def test_no_table_waits_longer_than_its_target_allows(writes, target_s, gap_s):
    """Planned at the latest at the last trigger before its oldest unlanded write would be older
    than the target's fraction, or at the first trigger after the write when triggers are further
    apart than that."""
    table = Table(writes, target_s)
    run(table, triggers_every(gap_s), interval_s=gap_s)
    bound = max(PLAN_AT_FRACTION * target_s, gap_s) + 1e-9
    assert all(stale <= bound for stale in table.planned_stale), (table.planned_stale, bound)


@given(WRITES, TARGETS, st.lists(GAPS, min_size=1, max_size=400))
def test_with_uneven_triggers_a_table_waits_at_most_one_gap_past_the_fraction(writes, target_s, gaps):
    """Triggers late past every recent gap (a round slower than all before it) cost at most that
    one gap more."""
    triggers = [sum(gaps[:i]) for i in range(len(gaps) + 1)]
    table = Table(writes, target_s)
    run(table, triggers, interval_s=min(gaps))
    bound = PLAN_AT_FRACTION * target_s + max(gaps) + 1e-9
    assert all(stale <= bound for stale in table.planned_stale), (table.planned_stale, bound)


@given(WRITES, TARGETS, GAPS, st.sets(st.integers(0, 2000), max_size=50))
def test_a_table_with_changes_is_eventually_planned_and_caught_up(writes, target_s, gap_s, failing):
    """Whatever rounds fail meanwhile, once the failures stop every write lands."""
    triggers = triggers_every(gap_s, until=400 + 4 * target_s)
    table = Table(writes, target_s)
    run(
        table,
        triggers,
        interval_s=gap_s,
        failing=frozenset(k for k in failing if k < len(triggers) and triggers[k] < 399),
    )
    assert table.lake == len(writes)


@given(WRITES, GAPS)
def test_a_table_without_a_target_is_planned_at_every_trigger_that_finds_changes(writes, gap_s):
    triggers = triggers_every(gap_s)
    table = Table(writes, None)
    run(table, triggers, interval_s=gap_s)
    changed = [
        now for before, now in zip([-1.0, *triggers], triggers, strict=False) if table.end(now) > table.end(before)
    ]
    assert table.planned_at == changed


def test_quiet_tables_are_planned_less_often_than_hot_ones():
    writes = [i * 0.1 for i in range(2000)]  # a write every 0.1 s for 200 s
    hot, quiet = Table(writes, 1.0), Table(writes, 60.0)
    for table in (hot, quiet):
        run(table, triggers_every(1.0, until=200), interval_s=1.0)
    assert len(hot.planned_at) == 200, "hot: every trigger"
    assert 5 <= len(quiet.planned_at) <= 8, quiet.planned_at  # every ~30 s, the first at once
    assert max(quiet.planned_stale) <= PLAN_AT_FRACTION * 60


def started(now: float = 0.0, interval_s: float = 1.0) -> FreshnessSchedule:
    schedule = FreshnessSchedule(interval_s)
    schedule.trigger(now)
    return schedule


def test_a_table_the_process_knows_nothing_of_is_due_at_once():
    schedule = started()
    assert schedule.due("t", IDENTITY, 3600.0)
    assert schedule.after_read("t", IDENTITY, LakePosition(7, {0: 3}), 3600.0)


def test_a_recreated_or_newly_owned_table_is_due_at_once():
    schedule = started()
    schedule.caught_up("t", IDENTITY)
    schedule.trigger(1.0)
    assert not schedule.due("t", IDENTITY, 3600.0), "caught up a second ago"
    assert schedule.due("t", (8, None), 3600.0), "re-created: a new table id"
    schedule.caught_up("t", (7, 3))
    schedule.trigger(2.0)
    assert schedule.due("t", (7, 4), 3600.0), "moved in the group and back: a new table epoch"


def test_a_round_in_flight_is_read_once_then_its_planning_time_is_the_clean_time():
    schedule = started(10.0)
    schedule.planned("t", IDENTITY, {0: 5, 1: 9})
    schedule.trigger(11.0)
    assert schedule.due("t", IDENTITY, 3600.0), "the lake must be read to learn whether the round landed"
    assert not schedule.after_read("t", IDENTITY, LakePosition(7, {0: 5, 1: 9}), 3600.0)
    assert schedule.held["t"] == pytest.approx(10.0 + PLAN_AT_FRACTION * 3600 - 1.0 - 11.0)
    schedule.trigger(12.0)
    assert not schedule.due("t", IDENTITY, 3600.0), "known now: no lake read"


@pytest.mark.parametrize(
    "lake", [LakePosition(7, {0: 5, 1: 8}), LakePosition(8, {0: 5, 1: 9}), None], ids=["behind", "re-created", "none"]
)
def test_a_table_whose_round_did_not_land_is_due_at_once(lake):
    schedule = started()
    schedule.caught_up("t", IDENTITY)
    schedule.trigger(1.0)
    schedule.planned("t", IDENTITY, {0: 5, 1: 9})
    schedule.trigger(2.0)
    assert schedule.after_read("t", IDENTITY, lake, 3600.0)


def test_a_table_planned_in_part_is_due_at_once():
    schedule = started()
    schedule.planned("t", IDENTITY, None)  # a read limit held one of its buckets back
    schedule.trigger(1.0)
    assert schedule.after_read("t", IDENTITY, LakePosition(7, {0: 100}), 3600.0)


def test_a_settled_table_that_changes_is_clean_as_of_the_trigger_before():
    schedule = started(0.0)
    schedule.caught_up("t", IDENTITY)
    for now in (1.0, 2.0, 50.0):  # unchanged at 1 and 2 (the planner asks nothing), changed by 50
        schedule.trigger(now)
    assert schedule.due("t", IDENTITY, 100.0), "clean as of 2.0 with a gap of 48 s: 96 s >= 50 s"
    schedule = started(0.0)
    schedule.caught_up("t", IDENTITY)
    for now in (1.0, 2.0, 3.0):
        schedule.trigger(now)
    assert not schedule.due("t", IDENTITY, 100.0)


def test_slow_triggers_widen_the_gap_the_rule_plans_for():
    schedule = started(0.0, interval_s=1.0)
    assert schedule.gap_s == 1.0
    for now in (1.0, 9.0, 10.0):
        schedule.trigger(now)
    assert schedule.gap_s == 8.0


def test_plan_now_is_the_rule():
    assert plan_now(target_s=None, clean_at=0.0, now=0.0, gap_s=1.0)
    assert plan_now(target_s=10.0, clean_at=None, now=0.0, gap_s=1.0)
    assert not plan_now(target_s=10.0, clean_at=0.0, now=3.9, gap_s=1.0)
    assert plan_now(target_s=10.0, clean_at=0.0, now=4.0, gap_s=1.0)


def test_asking_before_a_trigger_is_a_bug():
    with pytest.raises(RuntimeError, match="trigger"):
        FreshnessSchedule(1.0).caught_up("t", IDENTITY)
