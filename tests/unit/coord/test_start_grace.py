"""The start grace's pure decision: quiet membership with every expected member, or its end."""

from __future__ import annotations

import pytest

from tiering.coord.start_grace import StartGrace

pytestmark = pytest.mark.unit

GRACE = StartGrace(quiet_s=2.0, max_s=10.0)


def test_a_member_alone_in_a_new_group_waits_only_for_quiet():
    assert GRACE.remaining(waited_s=0.0, quiet_s=0.0, members={"a"}, expected={"a"}) == 2.0
    assert GRACE.remaining(waited_s=2.0, quiet_s=2.0, members={"a"}, expected={"a"}) == 0.0


def test_a_join_restarts_the_quiet_wait_and_an_expected_member_is_waited_for_up_to_the_end():
    assert GRACE.remaining(waited_s=3.0, quiet_s=0.5, members={"a", "b"}, expected={"a"}) == 1.5
    assert GRACE.remaining(waited_s=3.0, quiet_s=3.0, members={"a"}, expected={"a", "b"}) == 7.0
    assert GRACE.remaining(waited_s=9.5, quiet_s=0.0, members={"a", "b"}, expected={"a", "b"}) == 0.5
    assert GRACE.remaining(waited_s=10.0, quiet_s=10.0, members={"a"}, expected={"a", "b"}) == 0.0


def test_the_grace_of_a_session_is_bounded_by_it_and_checks_its_bounds():
    assert StartGrace.of_session(10.0) == StartGrace(quiet_s=2.0, max_s=10.0)
    with pytest.raises(ValueError, match="quiet_s <= max_s"):
        StartGrace(quiet_s=3.0, max_s=1.0)
