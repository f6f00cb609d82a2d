"""The job lease through the store seam on a real Apache Fluss cluster: Fluss keeps
``kv.snapshot.num-retained`` (2) snapshots per bucket and collects the older ones unless a lease
holds them, and it lists no lease's holds, so a new term lets go of every bucket no planned split
needs (docs/DESIGN.md §1, "unplanned")."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.support.store_sides import SNAPSHOT_WAIT, FlussSide
from tests.support.waiting import wait_until
from tiering.kvstore.contract import SnapshotRef
from tiering.lease.holds import SnapshotHolds
from tiering.lease.job_lease import JobLease, LeaseRenewer

pytestmark = pytest.mark.integration

#: shorter than the test runs: the held snapshot outlives it only by the renewer's renewals
LEASE_MS = 4_000


@pytest.fixture
def side(fluss_cluster) -> Iterator[FlussSide]:
    pytest.importorskip("fluss")
    made = FlussSide(fluss_cluster, f"lease_{uuid.uuid4().hex[:8]}")
    yield made
    made.close()


def rows(version: int) -> list[dict]:
    """Twenty keys: both buckets of a two-bucket table change."""
    return [{"id": key, "note": f"v{version}", "amount": float(version)} for key in range(1, 21)]


def newer(side: FlussSide, table: str, count: int, first: int) -> None:
    """``count`` newer snapshots of every bucket of ``table``."""
    for version in range(first, first + count):
        side.write(table, rows(version))
        side.fresh_snapshots(table)


def collected(side: FlussSide, table: str, ref: SnapshotRef) -> None:
    wait_until(lambda: not side.store.snapshot_available(table, ref), f"{ref} collected", **SNAPSHOT_WAIT)


def test_a_renewed_lease_holds_past_retention_a_new_term_lets_go_of_the_unplanned_and_drop_ends_it(side):
    store = side.store
    side.create_table("orders", 2)
    side.create_table("items", 1)
    for table in ("orders", "items"):
        side.write(table, rows(0))
    orders, items = side.fresh_snapshots("orders"), side.fresh_snapshots("items")
    planned, unplanned = orders[0], [orders[1], items[0]]

    lease = JobLease(store, f"fluss-job-{uuid.uuid4().hex}", epoch=1, duration_ms=LEASE_MS)
    lease.claim()
    assert lease.enabled and lease.acquire([planned, *unplanned]) == []
    assert lease.held() is None, "Fluss lists no lease's holds"
    with LeaseRenewer(lease) as renewer:
        newer(side, "orders", 3, first=1)  # past the 2 retained
        newer(side, "items", 3, first=1)
        # and past the lease's duration: three renewals (one every third of it) took that long
        wait_until(lambda: renewer.renewals >= 3, "the lease renewed past its duration", timeout_s=30, interval_s=0.1)
        assert all(store.snapshot_available(t, r) for t, r in (("orders", planned), ("orders", orders[1])))
        assert store.snapshot_available("items", items[0]), "held past retention while renewed"

        SnapshotHolds(lease).reconcile([planned], store)  # the next term plans bucket 0 of orders
        newer(side, "orders", 1, first=4)
        newer(side, "items", 1, first=4)
        collected(side, "orders", orders[1])
        collected(side, "items", items[0])
        assert store.snapshot_available("orders", planned), "the planned bucket keeps its hold"
        renewer.check()
        assert renewer.renewals >= 3

    lease.drop()
    assert lease.expires_at_ms is None
    newer(side, "orders", 1, first=5)
    collected(side, "orders", planned)
