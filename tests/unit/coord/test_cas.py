"""The compare-and-set loop's pure part: a conflict is retried, too many in a row give up."""

from __future__ import annotations

import pytest
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError

from tiering.coord.cas import MAX_CAS_ATTEMPTS, CasConflict, compare_and_set, is_conflict
from tiering.errors import CoordinationError

pytestmark = pytest.mark.unit


def test_an_attempt_that_lost_is_run_again_until_it_lands():
    attempts: list[int] = []

    def attempt() -> int:
        attempts.append(len(attempts))
        if len(attempts) < 3:
            raise CasConflict("/counter")
        return 42

    assert compare_and_set(attempt, what="counter at /counter") == 42
    assert attempts == [0, 1, 2]


def test_conflicts_in_a_row_give_up_naming_the_znode_and_other_errors_pass_through():
    attempts: list[int] = []

    def always_lost() -> int:
        attempts.append(1)
        raise CasConflict("/counter")

    with pytest.raises(CoordinationError, match=f"counter at /counter kept changing: gave up after {MAX_CAS_ATTEMPTS}"):
        compare_and_set(always_lost, what="counter at /counter")
    assert len(attempts) == MAX_CAS_ATTEMPTS

    def broken() -> int:
        raise CoordinationError("no quorum")

    with pytest.raises(CoordinationError, match="no quorum"):
        compare_and_set(broken, what="counter at /counter")


def test_only_a_refused_conditional_write_is_a_conflict():
    assert all(is_conflict(e()) for e in (BadVersionError, NodeExistsError, NoNodeError))
    assert not any(is_conflict(r) for r in (RolledBackError(), RuntimeError(), None, True))
