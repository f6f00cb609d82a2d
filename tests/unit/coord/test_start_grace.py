"""The start grace's pure decision: quiet membership with every expected member, the members a
group is configured with, or its end."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from tiering.coord.assignment import assign
from tiering.coord.start_grace import StartGrace

pytestmark = pytest.mark.unit

GRACE = StartGrace(quiet_s=2.0, max_s=10.0)
TABLES = [f"t{i:02d}" for i in range(12)]


def _remaining(grace: StartGrace, **now) -> float:
    return grace.wait(**now).s


def first_share(grace: StartGrace, joins: Mapping[str, float], expected: set[str] = frozenset()) -> dict[str, str]:
    """The first joiner's first assignment (table -> member) at a cold start, the members joining
    at the times ``joins`` gives: the decision stepped as the rebalancer waits on it, from one
    membership change (or the grace's answer) to the next."""
    first = min(joins.values())
    now = changed = first
    while True:
        members = {job for job, at in joins.items() if at <= now}
        changed = max(at for at in joins.values() if at <= now)
        wait = grace.wait(waited_s=now - first, quiet_s=now - changed, members=members, expected=expected)
        if wait.s <= 0:
            return assign(TABLES, members, {})
        now = min([now + wait.s, *(at for at in joins.values() if at > now)])


def test_a_member_alone_in_a_new_group_waits_only_for_quiet():
    assert _remaining(GRACE, waited_s=0.0, quiet_s=0.0, members={"a"}, expected={"a"}) == 2.0
    assert _remaining(GRACE, waited_s=2.0, quiet_s=2.0, members={"a"}, expected={"a"}) == 0.0


def test_a_join_restarts_the_quiet_wait_and_an_expected_member_is_waited_for_up_to_the_end():
    assert _remaining(GRACE, waited_s=3.0, quiet_s=0.5, members={"a", "b"}, expected={"a"}) == 1.5
    assert _remaining(GRACE, waited_s=3.0, quiet_s=3.0, members={"a"}, expected={"a", "b"}) == 7.0
    assert _remaining(GRACE, waited_s=9.5, quiet_s=0.0, members={"a", "b"}, expected={"a", "b"}) == 0.5
    assert _remaining(GRACE, waited_s=10.0, quiet_s=10.0, members={"a"}, expected={"a", "b"}) == 0.0


def test_at_a_cold_start_members_joining_further_apart_than_quiet_s_leave_all_to_the_first():
    # No table epoch names an owner yet: the grace knows of no one to wait for.
    share = first_share(GRACE, {"a": 0.0, "b": 3.0, "c": 6.0})
    assert set(share.values()) == {"a"}, "the first takes every table, to hand two thirds back"


def test_the_members_a_group_is_configured_with_are_waited_for_and_take_their_shares_at_once():
    grace = StartGrace(quiet_s=2.0, max_s=10.0, members=3)
    share = first_share(grace, {"a": 0.0, "b": 3.0, "c": 6.0})
    assert sorted(share.values()).count("a") == 4 and set(share.values()) == {"a", "b", "c"}
    # the last one joined: no quiet time, and named owners not joined do not hold the start
    assert grace.wait(waited_s=6.0, quiet_s=0.0, members={"a", "b", "c"}, expected={"a", "old"}).s == 0.0


def test_a_configured_member_that_never_comes_is_waited_for_up_to_the_end_only():
    grace = StartGrace(quiet_s=2.0, max_s=10.0, members=3)
    assert grace.wait(waited_s=7.0, quiet_s=7.0, members={"a", "b"}, expected=set()).s == 3.0
    end = grace.wait(waited_s=10.0, quiet_s=10.0, members={"a", "b"}, expected=set())
    assert (end.s, end.why) == (0.0, "job.group_members = 3: 2 joined when 10s ran out")
    share = first_share(grace, {"a": 0.0, "b": 1.0, "c": 11.0})
    assert set(share.values()) == {"a", "b"}


@pytest.mark.parametrize(
    ("grace", "now", "why"),
    [
        (
            StartGrace(2.0, 10.0, members=2),
            dict(waited_s=1.0, quiet_s=0.0, members={"a", "b"}),
            "job.group_members = 2: 2 joined",
        ),
        (GRACE, dict(waited_s=2.0, quiet_s=2.0, members={"a"}), "no table owned yet"),
        (GRACE, dict(waited_s=10.0, quiet_s=9.0, members={"a"}, expected={"a", "b"}), "not joined: ['b']"),
        (GRACE, dict(waited_s=4.0, quiet_s=2.0, members={"a", "b"}, expected={"a", "b"}), "owners ['a', 'b'] joined"),
    ],
)
def test_the_answer_says_whom_it_waited_for_and_why_it_stopped(grace, now, why):
    wait = grace.wait(**{"expected": set(), **now})
    assert wait.s == 0.0 and why in wait.why, wait.why


def test_the_grace_of_a_session_is_bounded_by_it_or_the_configured_wait_and_checks_its_bounds():
    assert StartGrace.of_session(10.0) == StartGrace(quiet_s=2.0, max_s=10.0)
    assert StartGrace.of_session(10.0, members=3, max_s=60.0) == StartGrace(quiet_s=2.0, max_s=60.0, members=3)
    assert StartGrace.of_session(10.0, max_s=1.0) == StartGrace(quiet_s=1.0, max_s=1.0)
    with pytest.raises(ValueError, match="quiet_s <= max_s"):
        StartGrace(quiet_s=3.0, max_s=1.0)
    with pytest.raises(ValueError, match="members"):
        StartGrace(quiet_s=1.0, max_s=3.0, members=0)
