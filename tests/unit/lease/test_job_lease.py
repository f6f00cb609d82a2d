"""JobLease's verbs on a store behind the seam (in memory): when a hold is acquired, renewed,
released and dropped, the epoch every call carries, and the expiry kept on this side, since the
seam answers none. The same verbs against the real stores: tests/integration/lease."""

from __future__ import annotations

import logging
import time

import pytest

from tests.unit.lease.conftest import DURATION_MS, LEASE
from tiering.errors import (
    BadRequestError,
    FencedEpochError,
    StoreUnavailableError,
    TableEpochFencedError,
)
from tiering.kvstore.contract import BucketId, SnapshotLease, StoreCatalog, TableClaims
from tiering.lease.job_lease import JobLease

pytestmark = pytest.mark.unit


def test_the_memory_store_is_a_store_behind_the_seam(store):
    assert isinstance(store, SnapshotLease) and isinstance(store, StoreCatalog)


def test_acquire_holds_the_snapshots_and_returns_the_ones_already_collected(store, lease):
    a0, a1, b0 = (store.latest_snapshots("a")[0], store.latest_snapshots("a")[1], store.latest_snapshots("b")[0])
    assert store.collect(a1) == [a1], "held by no lease: the GC deletes it"

    assert lease.acquire([a0, a1, b0]) == [a1]

    assert store.holds(LEASE) == {BucketId(1, 0): 1, BucketId(2, 0): 1}
    assert store.collect(a0, b0) == [], "held: the GC keeps them"


def test_a_newer_snapshot_replaces_the_buckets_hold(store, lease):
    lease.acquire([store.latest_snapshots("a")[0]])
    lease.acquire([store.snapshot("a", 0, 2, 20)])
    assert store.holds(LEASE) == {BucketId(1, 0): 2}


def test_a_group_members_acquire_carries_its_table_epochs_and_is_refused_whole_once_a_table_moved(store, lease):
    a0, b0 = store.latest_snapshots("a")[0], store.latest_snapshots("b")[0]
    lease.acquire([a0], TableClaims("g", "job-1", {1: 3}))
    other = JobLease(store, "other", 1, DURATION_MS)
    other.acquire([b0], TableClaims("g", "job-2", {1: 4, 2: 1}))

    with pytest.raises(TableEpochFencedError, match=r"table_ids \[1\]"):
        lease.acquire([a0, b0], TableClaims("g", "job-1", {1: 3, 2: 1}))
    assert store.holds(LEASE) == {BucketId(1, 0): 1}, "nothing of the refused acquire is held"


def test_release_table_lets_go_of_that_tables_buckets_only(store, lease):
    lease.acquire([*store.latest_snapshots("a").values(), *store.latest_snapshots("b").values()])
    lease.release_table(1, [0, 2])
    assert store.holds(LEASE) == {BucketId(1, 1): 1, BucketId(2, 0): 1, BucketId(2, 1): 1}


def test_a_release_of_many_tables_is_one_call_and_of_none_is_no_call(store, lease):
    lease.acquire([*store.latest_snapshots("a").values(), *store.latest_snapshots("b").values()])
    store.calls.clear()

    lease.release({1: [0, 1, 2], 2: {1}})
    lease.release({})
    lease.release({1: []})

    assert store.calls == ["release"]
    assert store.holds(LEASE) == {BucketId(2, 0): 1}


def test_a_release_of_a_lapsed_or_dropped_lease_has_nothing_left_to_release(store, lease):
    lease.acquire([store.latest_snapshots("a")[0]])
    store.advance(DURATION_MS)
    lease.release({1: [0]})
    lease.acquire([store.latest_snapshots("a")[0]])
    lease.drop()
    lease.release({1: [0]})
    assert store.calls.count("release") == 2


def test_a_renewal_extends_the_holds_and_is_false_once_the_lease_lapsed(store, lease):
    lease.acquire([store.latest_snapshots("a")[0]])
    store.advance(DURATION_MS - 1)
    assert lease.renew() is True
    store.advance(DURATION_MS - 1)
    assert store.holds(LEASE) == {BucketId(1, 0): 1}, "renewed: still held a duration after the acquire"

    store.advance(1)
    assert lease.renew() is False
    assert store.holds(LEASE) == {}
    assert lease.held() == [], "its holds are gone with it"


def test_held_lists_the_buckets_the_store_holds_and_none_where_it_cannot_list(store, lease):
    assert lease.held() == [], "an unknown lease holds nothing"
    lease.acquire([store.latest_snapshots("b")[1], store.latest_snapshots("a")[2]])
    assert lease.held() == [BucketId(1, 2), BucketId(2, 1)]

    store.lists_holds = False
    assert lease.held() is None


def test_claim_takes_the_lease_over_for_the_new_epoch_at_once(store, lease, caplog):
    lease.acquire([store.latest_snapshots("a")[0]])
    new_term = JobLease(store, LEASE, 2, DURATION_MS)

    with caplog.at_level(logging.INFO, logger="tiering.lease.job_lease"):
        new_term.claim()

    assert store.lease_epoch(LEASE) == 2
    assert [r.getMessage() for r in caplog.records] == ["lease L: claimed for epoch 2"]
    with pytest.raises(FencedEpochError):
        lease.release({1: [0]})
    assert store.holds(LEASE) == {BucketId(1, 0): 1}, "the previous term let go of nothing"


def test_claim_of_an_unknown_lease_creates_none(store, lease):
    lease.claim()
    assert store.lease_epoch(LEASE) is None and store.calls == ["renew"]
    assert lease.expires_at_ms is None


def test_claim_with_the_store_out_of_reach_is_logged_and_the_term_goes_on(store, lease, caplog):
    lease.acquire([])
    store.refuse("renew", StoreUnavailableError("store restarting"))
    with caplog.at_level(logging.WARNING, logger="tiering.lease.job_lease"):
        lease.claim()
    assert [r.getMessage() for r in caplog.records] == [
        "lease L: could not claim it for epoch 1 at the term's start: store restarting"
    ]
    assert lease.enabled


@pytest.mark.parametrize("verb", ["acquire", "renew", "release", "drop", "claim"])
def test_a_lower_epoch_than_the_lease_has_seen_is_refused_by_every_verb(store, lease, verb):
    JobLease(store, LEASE, 2, DURATION_MS).acquire([store.latest_snapshots("a")[0]])
    calls = {
        "acquire": lambda: lease.acquire([store.latest_snapshots("a")[1]]),
        "renew": lease.renew,
        "release": lambda: lease.release({1: [0]}),
        "drop": lease.drop,
        "claim": lease.claim,
    }
    with pytest.raises(FencedEpochError):
        calls[verb]()
    assert store.holds(LEASE) == {BucketId(1, 0): 1}


def test_a_lease_call_failing_otherwise_still_fails(store, lease):
    store.refuse("acquire", BadRequestError("bad snapshot ref"))
    with pytest.raises(BadRequestError):
        lease.acquire([store.latest_snapshots("a")[0]])
    assert lease.enabled


def test_drop_ends_the_lease_and_a_lease_already_gone_counts_as_dropped(store, lease):
    lease.acquire([store.latest_snapshots("a")[0]])
    lease.drop()
    assert store.holds(LEASE) == {} and lease.expires_at_ms is None
    lease.drop()
    assert store.calls.count("drop") == 2


def _sent(call) -> tuple[int, int]:
    """The epoch ms before and after ``call()``: when it was sent lies between."""
    before = int(time.time() * 1000)
    call()
    return before, int(time.time() * 1000)


def test_expiry_is_kept_here_a_duration_after_each_call_the_store_took_that_extends_the_lease(store, lease):
    assert lease.expires_at_ms is None, "no call yet"
    for extend in (lambda: lease.acquire([store.latest_snapshots("a")[0]]), lease.renew, lease.claim):
        before, after = _sent(extend)
        assert before + DURATION_MS <= lease.expires_at_ms <= after + DURATION_MS


def test_expiry_is_not_moved_by_a_release_nor_by_a_call_the_store_refused(store, lease):
    lease.acquire([store.latest_snapshots("a")[0]])
    kept = lease.expires_at_ms = 1  # a value no call made now could give

    lease.release({1: [0]})
    assert lease.expires_at_ms == kept

    store.refuse("renew", StoreUnavailableError("timed out"))
    with pytest.raises(StoreUnavailableError):
        lease.renew()
    assert lease.expires_at_ms == kept

    store.advance(DURATION_MS)
    assert lease.renew() is False
    assert lease.expires_at_ms == kept, "a lapsed lease renewed nothing"


def test_a_disabled_lease_never_calls_the_store(store):
    lease = JobLease(store, LEASE, 1, DURATION_MS, enabled=False)
    lease.claim()
    assert lease.acquire([store.latest_snapshots("a")[0]]) == []
    assert (lease.renew(), lease.held()) == (True, [])
    lease.release({1: [0]})
    lease.drop()
    assert store.calls == [] and lease.expires_at_ms is None
