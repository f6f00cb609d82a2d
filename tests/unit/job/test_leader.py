"""The leader loop's decision on a failed query (tiering.job.leader): whether it means the term was
lost (a LeadershipLostError) or is an error of its own."""

from __future__ import annotations

import threading

import pytest

from tiering.errors import LeadershipLostError, NotLeaderError, TieringError
from tiering.job.leader import _lost_reason

pytestmark = pytest.mark.unit


class Term:
    """What ``_lost_reason`` asks of a leader term."""

    def __init__(
        self, lost_reason: str | None = None, check_raises: Exception | None = None, refusal: str | None = None
    ) -> None:
        self.lost = threading.Event()
        if lost_reason is not None:
            self.lost.set()
        self.lost_reason = lost_reason
        self.refusal = refusal
        self._check_raises = check_raises
        self.checked = 0

    def check(self) -> None:
        self.checked += 1
        if self._check_raises is not None:
            raise self._check_raises


def test_a_fence_error_is_the_reason_without_asking_zookeeper():
    term = Term(check_raises=AssertionError("must not be asked"))

    assert _lost_reason(term, NotLeaderError("epoch 3 fenced by epoch 4")) == "epoch 3 fenced by epoch 4"
    assert term.checked == 0


def test_a_term_the_watchdog_ended_gives_its_own_reason():
    term = Term(lost_reason="session expired", check_raises=AssertionError("must not be asked"))

    assert _lost_reason(term, TieringError("query failed: py4j")) == "session expired"
    assert term.checked == 0


def test_otherwise_zookeeper_is_asked():
    assert (
        _lost_reason(Term(check_raises=LeadershipLostError("epoch moved on to 5")), RuntimeError("x"))
        == "epoch moved on to 5"
    )
    still_leading = Term()
    assert _lost_reason(still_leading, TieringError("query failed: disk full")) is None
    assert still_leading.checked == 1


def test_a_term_its_term_check_refused_is_over_though_zookeeper_would_now_confirm_it():
    # ZooKeeper was unreachable when the round's term check asked (the round aborted); it is back now
    term = Term(
        refusal="cannot confirm leadership of job 'j' (epoch 1): ConnectionLoss()",
        check_raises=AssertionError("must not be asked"),
    )

    assert _lost_reason(term, TieringError("query failed: py4j")) == term.refusal
    assert term.checked == 0
