"""SnapshotHolds, the release points of lease/holds.py, on a store behind the seam (in memory):
what the round in flight holds, when it is let go (finished, failed, failed over, stopped,
refused and sent again, unplanned at a new term's start), what a lapsed lease holds again, and a
term that is over letting go of nothing. The same points through a real job: tests/integration/lease."""

from __future__ import annotations

import logging

import pytest

from tests.support.memory_store import MemoryStore
from tests.unit.lease.conftest import DURATION_MS, LEASE
from tiering.errors import FencedEpochError, StoreUnavailableError, TableEpochFencedError
from tiering.kvstore.contract import BucketId, SnapshotRef, TableClaims
from tiering.lease.holds import SnapshotHolds
from tiering.lease.job_lease import JobLease

pytestmark = pytest.mark.unit


def snapshots(store: MemoryStore, table: str) -> list[SnapshotRef]:
    return list(store.latest_snapshots(table).values())


def every_snapshot(store: MemoryStore) -> list[SnapshotRef]:
    return snapshots(store, "a") + snapshots(store, "b")


def held(store: MemoryStore) -> dict[int, set[int]]:
    """What the store holds for the lease, ``table_id -> buckets``."""
    buckets: dict[int, set[int]] = {}
    for bucket in store.holds(LEASE):
        buckets.setdefault(bucket.table_id, set()).add(bucket.bucket)
    return buckets


@pytest.fixture
def releases(lease: JobLease) -> SnapshotHolds:
    return SnapshotHolds(lease)


def test_hold_acquires_the_rounds_snapshots_and_returns_the_ones_gone(store, releases):
    a = snapshots(store, "a")
    store.collect(a[2])
    assert releases.hold(a) == [a[2]]
    assert held(store) == {1: {0, 1}}

    store.calls.clear()
    assert releases.hold([]) == []
    assert store.calls == [], "a round without snapshots acquires nothing"


def test_a_group_members_hold_carries_its_claims_and_holds_nothing_once_a_table_moved(store, releases):
    JobLease(store, "other", 1, DURATION_MS).acquire([], TableClaims("g", "job-2", {1: 2}))
    with pytest.raises(TableEpochFencedError):
        releases.hold(snapshots(store, "a"), TableClaims("g", "job-1", {1: 1}))
    assert held(store) == {}


def test_a_snapshot_found_gone_by_the_hold_is_not_the_round_in_flights(store, releases, caplog):
    """Its table already fails; a lapse later does not acquire it again nor count it lost."""
    a = snapshots(store, "a")
    store.collect(a[0])
    releases.hold(a)
    store.advance(DURATION_MS)
    with caplog.at_level(logging.WARNING, logger="tiering.lease.holds"):
        releases.after_renewal(False)
    assert releases.lost() == frozenset()
    assert [r.getMessage() for r in caplog.records] == [
        "lease L lapsed: acquired the 2 snapshots of the round in flight again"
    ]


def test_finished_lets_go_of_every_committed_table_in_one_call(store, releases):
    releases.hold(every_snapshot(store))
    store.calls.clear()
    releases.finished({1: [0, 1, 2], 2: [1]})
    assert store.calls == ["release"]
    assert held(store) == {2: {0}}


def test_failed_lets_go_of_that_table_only(store, releases):
    releases.hold(every_snapshot(store))
    releases.failed(2, [0, 1])
    assert held(store) == {1: {0, 1, 2}}


def test_failed_over_lets_go_of_every_unsettled_table_and_every_refused_release_in_one_call(store, releases):
    releases.hold(every_snapshot(store))
    store.refuse("release", StoreUnavailableError("503"))
    releases.failed(2, [1])
    store.calls.clear()

    releases.failed_over({1: [0, 1, 2], 2: [0]})

    assert store.calls == ["release"]
    assert held(store) == {}


@pytest.mark.parametrize("error", [StoreUnavailableError("503"), FencedEpochError("epoch 1 is below 2")])
def test_failed_over_is_best_effort_and_never_raises_over_the_rounds_own_error(store, releases, error, caplog):
    releases.hold(every_snapshot(store))
    store.refuse("release", error)
    with caplog.at_level(logging.WARNING, logger="tiering.lease.holds"):
        releases.failed_over({1: [0], 2: [0]})
    assert held(store) == {1: {0, 1, 2}, 2: {0, 1}}
    warned = [r.getMessage() for r in caplog.records]
    if isinstance(error, FencedEpochError):
        assert warned == [], "a term that is over says nothing of the lease: the new leader owns it"
    else:
        assert warned == ["lease L: release of table_ids [1, 2] after an aborted round failed: 503"]


def test_a_refused_release_is_kept_and_sent_again_in_one_call_until_the_store_takes_it(store, releases, caplog):
    releases.hold(every_snapshot(store))
    store.refuse("release", StoreUnavailableError("503"), times=3)
    with caplog.at_level(logging.WARNING, logger="tiering.lease.holds"):
        releases.finished({1: [0]})
        releases.failed(2, [1])
    assert held(store) == {1: {0, 1, 2}, 2: {0, 1}}
    assert [r.getMessage() for r in caplog.records] == [
        "lease L: release after the commit refused for table_ids [1] (sent again at the next renewal or round): 503",
        "lease L: release of a failed table refused for table_ids [2] (sent again at the next renewal or round): 503",
    ]

    store.calls.clear()
    releases.retry_refused()
    assert store.calls == ["release"], "both, in one call"
    assert held(store) == {1: {0, 1, 2}, 2: {0, 1}}, "refused again: kept for the next try"

    releases.after_renewal(True)
    assert held(store) == {1: {1, 2}, 2: {0}}

    store.calls.clear()
    releases.retry_refused()
    releases.after_renewal(True)
    assert store.calls == [], "nothing refused is left to send"


def test_a_refused_release_of_a_bucket_the_next_round_holds_again_is_never_sent(store, releases):
    """Sent after the next round's acquire of the same bucket, it would let go of that round's hold."""
    releases.hold(every_snapshot(store))
    store.refuse("release", StoreUnavailableError("503"))
    releases.finished({1: [0, 1], 2: [0]})

    releases.hold([store.snapshot("a", 0, 2, 20), store.snapshot("b", 0, 2, 20)])
    releases.retry_refused()

    assert store.holds(LEASE) == {BucketId(1, 0): 2, BucketId(1, 2): 1, BucketId(2, 0): 2, BucketId(2, 1): 1}


@pytest.mark.parametrize("point", ["finished", "failed", "retry_refused"])
def test_a_term_that_is_over_lets_go_of_nothing_and_hears_so(store, releases, point):
    releases.hold(every_snapshot(store))
    store.refuse("release", StoreUnavailableError("503"))
    releases.failed(2, [0])
    JobLease(store, LEASE, 2, DURATION_MS).claim()
    calls = {
        "finished": lambda: releases.finished({1: [0, 1, 2]}),
        "failed": lambda: releases.failed(1, [0]),
        "retry_refused": releases.retry_refused,
    }
    with pytest.raises(FencedEpochError):
        calls[point]()
    assert held(store) == {1: {0, 1, 2}, 2: {0, 1}}


def test_a_lapsed_lease_holds_the_round_in_flight_again_at_the_renewal_and_loses_what_was_collected(
    store, releases, caplog
):
    a, b = snapshots(store, "a"), snapshots(store, "b")
    releases.hold(a + b)
    releases.finished({2: [0, 1]})
    store.advance(DURATION_MS)
    assert store.collect(*a[1:]) == a[1:], "lapsed: nothing keeps them from the GC"

    with caplog.at_level(logging.WARNING, logger="tiering.lease.holds"):
        releases.after_renewal(False)

    assert store.holds(LEASE) == {BucketId(1, 0): 1}, "table b finished: it is not held again"
    assert releases.lost() == frozenset(a[1:])
    assert [r.getMessage() for r in caplog.records] == [
        "lease L lapsed: acquired the 3 snapshots of the round in flight again; 2 already gone, their tables fail "
        "(snapshot_gone)"
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tiering.lease.holds"):
        releases.after_renewal(False)
    assert releases.lost() == frozenset(a[1:]), "what is lost stays lost until the next round"
    assert "acquired the 1 snapshots of the round in flight again" in caplog.text, "the lost left the round"


def test_the_next_rounds_hold_starts_with_nothing_lost(store, releases):
    a = snapshots(store, "a")
    releases.hold(a)
    store.advance(DURATION_MS)
    store.collect(a[0])
    releases.after_renewal(False)
    assert releases.lost() == frozenset({a[0]})

    releases.hold(snapshots(store, "b"))
    assert releases.lost() == frozenset()
    store.advance(DURATION_MS)
    store.calls.clear()
    releases.after_renewal(False)
    assert held(store) == {2: {0, 1}}, "the new round in flight, not the old one"


def test_a_renewal_that_found_the_lease_alive_acquires_nothing(store, releases):
    releases.hold(every_snapshot(store))
    store.calls.clear()
    releases.after_renewal(True)
    assert store.calls == []


def test_released_buckets_leave_the_round_in_flight(store, releases):
    releases.hold(every_snapshot(store))
    releases.failed(1, [0, 1, 2])
    releases.failed_over({2: [1]})
    store.advance(DURATION_MS)
    releases.after_renewal(False)
    assert store.holds(LEASE) == {BucketId(2, 0): 1}


def test_a_new_term_lets_go_of_every_hold_no_planned_split_needs(store, lease, caplog):
    lease.acquire(every_snapshot(store))
    planned = [store.snapshot("a", 1, 2, 20)]
    store.calls.clear()

    with caplog.at_level(logging.INFO, logger="tiering.lease.holds"):
        SnapshotHolds(lease).reconcile(planned, store)

    assert held(store) == {1: {1}}
    assert store.calls == ["held", "release"], "a store that lists its holds is not asked for its tables"
    assert [r.getMessage() for r in caplog.records] == [
        "lease L: released 4 holds no planned round needs (table_ids [1, 2]), left by an earlier term"
    ]


def test_a_new_term_with_every_hold_planned_releases_nothing(store, lease, caplog):
    lease.acquire(snapshots(store, "b"))
    store.calls.clear()
    with caplog.at_level(logging.INFO, logger="tiering.lease.holds"):
        SnapshotHolds(lease).reconcile(snapshots(store, "b"), store)
    assert store.calls == ["held"] and caplog.records == []
    assert held(store) == {2: {0, 1}}


def test_a_new_term_on_a_store_that_lists_no_holds_lets_go_of_every_unplanned_bucket_of_every_table(
    store, lease, caplog
):
    lease.acquire([snapshots(store, "a")[2], snapshots(store, "b")[0]])
    store.lists_holds = False
    store.calls.clear()

    with caplog.at_level(logging.INFO, logger="tiering.lease.holds"):
        SnapshotHolds(lease).reconcile(snapshots(store, "a")[:2], store)

    assert held(store) == {}
    assert store.calls == ["held", "tables", "release"]
    assert [r.getMessage() for r in caplog.records] == [
        "lease L: released the 3 buckets no planned round needs (table_ids [1, 2]): the store lists no holds, "
        "and an earlier term may have left one on any"
    ]


def test_a_stop_drops_the_lease(store, releases):
    releases.hold(every_snapshot(store))
    releases.stopped()
    assert store.holds(LEASE) == {} and store.expires_at_ms(LEASE) is None
    assert releases.lease.expires_at_ms is None


def test_a_release_of_a_lapsed_lease_is_done_not_kept_to_send_again(store, releases):
    """A lapsed lease holds nothing: the store's "no such lease" is no refusal."""
    releases.hold(every_snapshot(store))
    store.advance(DURATION_MS)
    releases.finished({1: [0]})
    store.calls.clear()
    releases.retry_refused()
    assert store.calls == []
