"""LeaseRenewer on a store behind the seam (in memory): it renews until stopped, tells ``after``
what every answered renewal found, rides out a store out of reach, and hands anything else (a
fenced epoch above all) to the caller's thread instead of swallowing it."""

from __future__ import annotations

import logging
import threading

import pytest

from tests.support.waiting import wait_until
from tests.unit.lease.conftest import DURATION_MS, LEASE
from tiering.errors import BadRequestError, FencedEpochError, StoreUnavailableError
from tiering.kvstore.contract import BucketId
from tiering.lease.job_lease import JobLease, LeaseRenewer

pytestmark = pytest.mark.unit

TICK_S = 0.01
WAIT = {"timeout_s": 30.0, "interval_s": 0.01}


class Answers:
    """What ``after`` was told, in order; ``stopped`` is set once it holds ``until`` answers."""

    def __init__(self, until: int) -> None:
        self.seen: list[bool] = []
        self.until = until
        self.stopped = threading.Event()

    def __call__(self, renewed: bool) -> None:
        self.seen.append(renewed)
        if len(self.seen) >= self.until:
            self.stopped.set()


def test_the_renewer_keeps_the_lease_and_tells_after_of_every_renewal(store, lease):
    lease.acquire([store.latest_snapshots("a")[0]])
    answers = Answers(until=3)
    with LeaseRenewer(lease, TICK_S, after=answers) as renewer:
        wait_until(answers.stopped.is_set, "three renewals", **WAIT)
        store.advance(DURATION_MS - 1)
        renewed = renewer.renewals
        wait_until(lambda: renewer.renewals > renewed + 1, "a renewal sent after the clock moved", **WAIT)
        store.advance(DURATION_MS - 1)
    renewer.check()
    assert set(answers.seen) == {True}
    assert store.holds(LEASE) == {BucketId(1, 0): 1}, "held twice its duration after the acquire"


def test_a_lapsed_lease_is_told_to_after_with_a_warning_and_the_renewer_goes_on(store, lease, caplog):
    lease.acquire([store.latest_snapshots("a")[0]])
    store.advance(DURATION_MS)
    answers = Answers(until=2)
    with caplog.at_level(logging.WARNING, logger="tiering.lease.job_lease"):
        with LeaseRenewer(lease, TICK_S, after=answers) as renewer:
            wait_until(answers.stopped.is_set, "two renewals of the lapsed lease", **WAIT)
    renewer.check()
    assert answers.seen[:2] == [False, False] and renewer.renewals == 0
    assert caplog.records[0].getMessage() == (
        "lease L: expired or unknown at renewal (epoch 1); its snapshot holds are gone until acquired again"
    )


def test_a_store_out_of_reach_is_logged_and_the_next_tick_renews(store, lease, caplog):
    lease.acquire([])
    store.refuse("renew", StoreUnavailableError("connection refused"), times=2)
    answers = Answers(until=1)
    with caplog.at_level(logging.WARNING, logger="tiering.lease.job_lease"):
        with LeaseRenewer(lease, TICK_S, after=answers) as renewer:
            wait_until(answers.stopped.is_set, "a renewal after the outage", **WAIT)
    renewer.check()
    assert answers.seen[0] is True and renewer.failure is None
    assert [r.getMessage() for r in caplog.records][:2] == [
        f"lease L: renewal failed, retrying in {TICK_S:.1f}s: connection refused"
    ] * 2


@pytest.mark.parametrize("error", [FencedEpochError("epoch 1 is below 2"), BadRequestError("bad lease id")])
def test_a_fenced_epoch_or_any_other_failure_ends_the_renewer_and_check_raises_it(store, lease, error):
    lease.acquire([])
    store.refuse("renew", error)
    answers = Answers(until=1)
    renewer = LeaseRenewer(lease, TICK_S, after=answers).start()
    wait_until(lambda: renewer.failure is not None, "the renewer to stop", **WAIT)
    renewer.stop()
    with pytest.raises(type(error)) as raised:
        renewer.check()
    assert raised.value is error
    assert answers.seen == [] and renewer.renewals == 0
    assert store.calls.count("renew") == 1, "nothing renews after it"


def test_a_fenced_new_term_fences_the_old_terms_renewer(store, lease):
    lease.acquire([])
    JobLease(store, LEASE, 2, DURATION_MS).claim()
    renewer = LeaseRenewer(lease, TICK_S).start()
    wait_until(lambda: renewer.failure is not None, "the old term's renewer to stop", **WAIT)
    renewer.stop()
    with pytest.raises(FencedEpochError):
        renewer.check()
    assert store.lease_epoch(LEASE) == 2
