"""JobLease and LeaseRenewer against the real reference store process (its own process, real GC),
through the store seam (``ReferenceStore``)."""

from __future__ import annotations

import logging
import time
import uuid

import pytest

from tests.support.waiting import STORE_PACE, wait_until
from tiering.errors import FencedEpochError, SnapshotUnavailableError
from tiering.kvstore import retry
from tiering.kvstore.client import KvStoreClient
from tiering.kvstore.contract import BucketId, SnapshotRef
from tiering.kvstore.models import TableSpec
from tiering.kvstore.reference import ReferenceStore
from tiering.lease.job_lease import JobLease, LeaseRenewer

pytestmark = pytest.mark.integration

LONG_MS = 120_000


def make_table(client: KvStoreClient, name: str, num_buckets: int = 2) -> str:
    client.create_table(
        TableSpec(
            name=name,
            schema=[{"name": "id", "type": "bigint"}, {"name": "v", "type": "string"}],
            primary_key=["id"],
            num_buckets=num_buckets,
        )
    )
    return name


def snapshot_refs(client: KvStoreClient, table: str, first_id: int = 0) -> list[SnapshotRef]:
    """Write rows (ids ``first_id..first_id+19``) and snapshot every bucket; the refs, by bucket."""
    client.upsert(table, [{"id": i, "v": f"v{i}"} for i in range(first_id, first_id + 20)])
    snaps = client.take_snapshots(table)
    return sorted(
        (SnapshotRef(snaps.table_id, s.bucket, s.snapshot_id, s.log_offset) for s in snaps.buckets),
        key=lambda r: r.bucket,
    )


def lease_id() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


def job_lease(client: KvStoreClient, lease: str, epoch: int, duration_ms: int) -> JobLease:
    return JobLease(ReferenceStore(client), lease, epoch=epoch, duration_ms=duration_ms)


def snapshot_ids(refs) -> set[tuple[int, int, int]]:
    """``(table_id, bucket, snapshot_id)`` of snapshot references, the store's or the seam's."""
    return {(r.table_id, r.bucket, r.snapshot_id) for r in refs}


def holding(client: KvStoreClient, lease: str) -> set[tuple[int, int, int]]:
    """The snapshots the store holds for ``lease``, as :func:`snapshot_ids` names them."""
    return snapshot_ids(client.get_lease(lease).snapshots)


def buckets(refs: list[SnapshotRef]) -> list[BucketId]:
    """What :meth:`JobLease.held` lists for ``refs``: their buckets, in order."""
    return sorted({BucketId(r.table_id, r.bucket) for r in refs}, key=lambda b: (b.table_id, b.bucket))


def test_acquire_holds_snapshots_visible_in_the_store(store_client):
    table = make_table(store_client, "orders_acq")
    refs = snapshot_refs(store_client, table) + snapshot_refs(store_client, table, 100)
    lease = job_lease(store_client, lease_id(), epoch=3, duration_ms=LONG_MS)

    assert lease.acquire(refs[:2]) == []
    assert lease.acquire(refs[2:]) == []  # a second acquire adds holds, keeps the first ones

    held = store_client.get_lease(lease.lease_id)
    assert held.epoch == 3
    assert snapshot_ids(held.snapshots) == snapshot_ids(refs)
    assert held.expires_at_ms > time.time() * 1000 + LONG_MS / 2
    assert lease.expires_at_ms is not None and lease.expires_at_ms <= held.expires_at_ms, "never later than the store's"
    assert lease.held() == buckets(refs), "two snapshots of a bucket: one bucket held"
    assert lease.lease_id in {x.lease_id for x in store_client.list_leases()}


def test_release_table_frees_only_that_tables_buckets(store_client):
    orders = snapshot_refs(store_client, make_table(store_client, "orders_rel"))
    items = snapshot_refs(store_client, make_table(store_client, "items_rel"))
    lease = job_lease(store_client, lease_id(), epoch=1, duration_ms=LONG_MS)
    assert lease.acquire(orders + items) == []

    lease.release_table(orders[0].table_id, [0])
    assert lease.held() == buckets([orders[1], *items])

    lease.release_table(items[0].table_id, [0, 1])
    assert lease.held() == buckets([orders[1]])
    lease.release_table(items[0].table_id, [])  # nothing to release is not a call
    assert holding(store_client, lease.lease_id) == snapshot_ids([orders[1]])


def test_a_held_snapshot_survives_gc_until_released(store_factory):
    store = store_factory(num_retained=1, gc_interval_s=0.2)
    client = store.client()
    held = snapshot_refs(client, make_table(client, "orders_gc"))
    lease = job_lease(client, lease_id(), epoch=1, duration_ms=LONG_MS)
    assert lease.acquire(held) == []

    superseded = snapshot_refs(client, "orders_gc", 100)  # never leased
    snapshot_refs(client, "orders_gc", 200)  # the newest: retained

    def gone(ref: SnapshotRef) -> bool:
        try:
            client.get_snapshot("orders_gc", ref.bucket, ref.snapshot_id)
        except SnapshotUnavailableError:
            return True
        return False

    wait_until(lambda: all(gone(r) for r in superseded), what="GC of the unleased snapshots", **STORE_PACE)
    assert not any(gone(r) for r in held)  # the leased ones are still there after GC ran
    assert lease.acquire(superseded) == superseded  # the store checks files at acquire

    lease.release_table(held[0].table_id, [0])
    wait_until(lambda: gone(held[0]), what="GC of the released snapshot", **STORE_PACE)
    assert not gone(held[1])


def test_renew_after_expiry_is_false_and_the_holds_are_gone(store_client):
    refs = snapshot_refs(store_client, make_table(store_client, "orders_exp"))
    lease = job_lease(store_client, lease_id(), epoch=1, duration_ms=300)
    assert lease.acquire(refs) == []
    assert lease.renew() is True

    time.sleep(0.5)
    assert lease.renew() is False
    assert lease.held() == []
    lease.release_table(refs[0].table_id, [0])  # an expired lease holds nothing: no error

    # Re-acquire is the way back; the store re-checks every snapshot.
    long_lease = job_lease(store_client, lease.lease_id, epoch=1, duration_ms=LONG_MS)
    assert long_lease.acquire(refs) == []
    assert long_lease.renew() is True
    assert holding(store_client, lease.lease_id) == snapshot_ids(refs)


def test_renewer_keeps_the_lease_alive_past_its_duration(store_client):
    refs = snapshot_refs(store_client, make_table(store_client, "orders_renewer"))
    lease = job_lease(store_client, lease_id(), epoch=2, duration_ms=600)
    assert lease.acquire(refs) == []

    with LeaseRenewer(lease) as renewer:
        assert renewer.interval_s == pytest.approx(0.2)
        time.sleep(2.0)  # > 3 durations
        assert lease.held() == buckets(refs)
        assert renewer.renewals >= 5
        renewer.check()

    time.sleep(0.8)  # stopped: nothing renews it any more
    assert lease.held() == []


def test_renewer_reports_a_lapsed_lease_and_keeps_going(store_client, caplog):
    caplog.set_level(logging.WARNING, logger="tiering.lease.job_lease")
    lease = job_lease(store_client, lease_id(), epoch=1, duration_ms=200)
    assert lease.acquire([]) == []
    renewer = LeaseRenewer(lease, interval_s=0.5).start()  # slower than the lease lives
    try:
        wait_until(
            lambda: any("expired or unknown at renewal" in r.getMessage() for r in caplog.records),
            what="the renewer to report the lapse",
            **STORE_PACE,
        )
        assert lease.held() == []  # the store agrees: nothing is held any more
        renewer.check()  # lapsing is not a failure: the committer re-acquires before it reads
        assert renewer._thread.is_alive()
    finally:
        renewer.stop()


def test_lower_epoch_is_fenced_everywhere(store_client):
    refs = snapshot_refs(store_client, make_table(store_client, "orders_fence"))
    lid = lease_id()
    current = job_lease(store_client, lid, epoch=5, duration_ms=LONG_MS)
    assert current.acquire(refs) == []
    zombie = job_lease(store_client, lid, epoch=4, duration_ms=LONG_MS)

    calls = (
        zombie.renew,
        lambda: zombie.acquire(refs),
        lambda: zombie.release_table(refs[0].table_id, [0]),
        zombie.drop,
    )
    for call in calls:
        with pytest.raises(FencedEpochError):
            call()
    assert holding(store_client, lid) == snapshot_ids(refs)  # the zombie changed nothing

    newer = job_lease(store_client, lid, epoch=6, duration_ms=LONG_MS)
    assert newer.renew() is True
    assert store_client.get_lease(lid).epoch == 6
    with pytest.raises(FencedEpochError):
        current.renew()  # the old term is now the zombie


def test_claim_fences_the_previous_term_at_once_and_creates_no_lease(store_client):
    refs = snapshot_refs(store_client, make_table(store_client, "orders_claim"))
    lid = lease_id()
    previous = job_lease(store_client, lid, epoch=2, duration_ms=LONG_MS)
    assert previous.acquire(refs) == []

    claimed = job_lease(store_client, lid, epoch=3, duration_ms=LONG_MS)
    claimed.claim()
    assert store_client.get_lease(lid).epoch == 3 and claimed.expires_at_ms is not None
    assert holding(store_client, lid) == snapshot_ids(refs), "a claim keeps the holds"
    with pytest.raises(FencedEpochError):
        previous.release_table(refs[0].table_id, [0])

    unknown = job_lease(store_client, lease_id(), epoch=1, duration_ms=LONG_MS)
    unknown.claim()
    assert unknown.held() == [], "nothing to take over: the first acquire creates the lease"
    assert unknown.lease_id not in {x.lease_id for x in store_client.list_leases()}
    assert unknown.expires_at_ms is None, "no expiry before the store took a call"
    with pytest.raises(FencedEpochError):
        job_lease(store_client, lid, epoch=1, duration_ms=LONG_MS).claim()


def test_renewer_stops_on_a_fenced_epoch_and_hands_it_to_the_caller(store_client):
    lid = lease_id()
    job_lease(store_client, lid, epoch=9, duration_ms=LONG_MS).acquire([])
    renewer = LeaseRenewer(job_lease(store_client, lid, epoch=8, duration_ms=LONG_MS), interval_s=0.05).start()
    try:
        wait_until(lambda: renewer.failure is not None, what="the renewer to hit the fence", **STORE_PACE)
        with pytest.raises(FencedEpochError):
            renewer.check()
        wait_until(lambda: not renewer._thread.is_alive(), what="the renewer thread to end", **STORE_PACE)
    finally:
        renewer.stop()


def test_drop_ends_the_lease_and_is_idempotent(store_client):
    refs = snapshot_refs(store_client, make_table(store_client, "orders_drop"))
    lease = job_lease(store_client, lease_id(), epoch=1, duration_ms=LONG_MS)
    assert lease.acquire(refs) == []
    lease.drop()
    assert lease.held() == [] and lease.expires_at_ms is None
    assert lease.lease_id not in {x.lease_id for x in store_client.list_leases()}
    lease.drop()
    assert lease.renew() is False


def test_lease_and_renewer_survive_a_store_crash(kv_store, caplog, monkeypatch):
    # Fail store calls at once instead of the client's ~30 s of retries, so the renewer's
    # own "store unavailable" path runs while the store is down.
    monkeypatch.setattr(retry, "STORE_RETRY", retry.instant(retry.STORE_RETRY, attempts=1))
    caplog.set_level(logging.WARNING, logger="tiering.lease.job_lease")
    client = kv_store.client()
    refs = snapshot_refs(client, make_table(client, "orders_crash"))
    lease = job_lease(client, lease_id(), epoch=1, duration_ms=30_000)
    assert lease.acquire(refs) == []

    with LeaseRenewer(lease, interval_s=0.1) as renewer:
        kv_store.kill()
        wait_until(
            lambda: any("renewal failed, retrying" in r.getMessage() for r in caplog.records),
            what="a renewal to fail while the store is down",
            **STORE_PACE,
        )
        kv_store.restart()
        before = renewer.renewals
        wait_until(lambda: renewer.renewals > before + 1, what="renewals to resume after the restart", **STORE_PACE)
        renewer.check()  # an outage is not a failure: the renewer kept going
    assert holding(kv_store.client(), lease.lease_id) == snapshot_ids(refs)
