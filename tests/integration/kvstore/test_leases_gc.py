"""GC against leases: what a lease holds survives GC until released or expired; epochs fence.

The fencing cases share the module's store (``emptied_kv_store``); the GC cases start their own,
GC running every 0.2 s.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

from tests.support.store import orders_spec, wait_gc_passes
from tests.support.waiting import STORE_PACE, wait_until
from tiering.errors import (
    ConflictError,
    FencedEpochError,
    LeaseNotFoundError,
    NotFoundError,
    SnapshotUnavailableError,
    TableNotFoundError,
)
from tiering.kvstore.models import BucketRef, LakeReport, SnapshotRef

pytestmark = pytest.mark.integration


def _gone(client, table: str, bucket: int, snapshot_id: int) -> bool:
    try:
        client.get_snapshot(table, bucket, snapshot_id)
        return False
    except SnapshotUnavailableError:
        return True


def _three_snapshots(client, hold_first_as: str | None = None, hold_ms: int = 60_000) -> tuple[int, list]:
    """Snapshots 1, 2, 3 of bucket 0; ``hold_first_as`` leases snapshot 1 while it is still the
    newest (with GC running every 0.2 s, a later acquire could come after its deletion)."""
    info = client.create_table(orders_spec())
    snaps = []
    for i in range(3):
        client.upsert("orders", [{"id": i, "amount": float(i)}])
        snaps.append(client.take_snapshots("orders").buckets[0])
        if i == 0 and hold_first_as:
            ref = SnapshotRef(table_id=info.table_id, bucket=0, snapshot_id=1)
            held = client.acquire_lease(hold_first_as, epoch=1, duration_ms=hold_ms, snapshots=[ref])
            assert held.unavailable == [] and held.snapshots == [ref]
    assert [s.snapshot_id for s in snaps] == [1, 2, 3]
    return info.table_id, snaps


def test_gc_keeps_leased_snapshot_until_release(store_factory):
    store = store_factory(num_retained=1, gc_interval_s=0.2)
    client = store.client()
    table_id, snaps = _three_snapshots(client, hold_first_as="job-a")

    wait_until(lambda: _gone(client, "orders", 0, 2), "unleased snapshot 2 to be collected", **STORE_PACE)
    assert not Path(snaps[1].files[0]).exists()
    assert client.get_snapshot("orders", 0, 1) == snaps[0]  # leased: kept
    assert Path(snaps[0].files[0]).exists()
    assert client.get_snapshot("orders", 0, 3) == snaps[2]  # newest: retained

    released = client.release_lease("job-a", epoch=1, buckets=[BucketRef(table_id=table_id, bucket=0)])
    assert released.snapshots == []
    wait_until(lambda: _gone(client, "orders", 0, 1), "released snapshot 1 to be collected", **STORE_PACE)
    assert not Path(snaps[0].files[0]).exists()
    assert [lease.lease_id for lease in client.list_leases()] == ["job-a"]  # release keeps the lease


def test_expired_lease_frees_its_snapshots_and_cannot_be_renewed(store_factory):
    store = store_factory(num_retained=1, gc_interval_s=0.2)
    client = store.client()
    table_id, snaps = _three_snapshots(client, hold_first_as="job-b", hold_ms=600)
    ref = SnapshotRef(table_id=table_id, bucket=0, snapshot_id=1)

    wait_until(lambda: _gone(client, "orders", 0, 1), "snapshot 1 collected after its lease expired", **STORE_PACE)
    assert not Path(snaps[0].files[0]).exists()
    with pytest.raises(LeaseNotFoundError) as renew:
        client.renew_lease("job-b", epoch=3, duration_ms=60_000)
    assert renew.value.status == 404 and renew.value.code == "LEASE_NOT_FOUND" and renew.value.lease_id == "job-b"
    with pytest.raises(LeaseNotFoundError):
        client.get_lease("job-b")

    again = client.acquire_lease(
        "job-b", epoch=3, duration_ms=60_000, snapshots=[ref, SnapshotRef(table_id=table_id, bucket=0, snapshot_id=3)]
    )
    assert again.unavailable == [ref]
    assert [s.snapshot_id for s in again.snapshots] == [3]


def test_lease_epoch_fencing(emptied_kv_store):
    client = emptied_kv_store.client()
    table_id, _ = _three_snapshots(client)
    ref = SnapshotRef(table_id=table_id, bucket=0, snapshot_id=3)
    assert client.acquire_lease("job", epoch=5, duration_ms=60_000, snapshots=[ref]).epoch == 5

    bucket = [BucketRef(table_id=table_id, bucket=0)]
    for stale_call in (
        lambda: client.renew_lease("job", epoch=4, duration_ms=60_000),
        lambda: client.release_lease("job", epoch=4, buckets=bucket),
        lambda: client.acquire_lease("job", epoch=4, duration_ms=60_000, snapshots=[]),
        lambda: client.drop_lease("job", epoch=4),
    ):
        with pytest.raises(FencedEpochError) as fenced:
            stale_call()
        assert fenced.value.status == 409 and fenced.value.code == "FENCED_EPOCH"
    lease = client.get_lease("job")
    assert (lease.epoch, lease.snapshots) == (5, [ref])  # the stale calls changed nothing

    assert client.renew_lease("job", epoch=7, duration_ms=60_000).epoch == 7
    with pytest.raises(FencedEpochError):
        client.renew_lease("job", epoch=6, duration_ms=60_000)
    client.drop_lease("job", epoch=7)
    assert client.list_leases() == []
    with pytest.raises(LeaseNotFoundError):
        client.drop_lease("job", epoch=7)


def test_lake_report_epoch_fencing(emptied_kv_store):
    client = emptied_kv_store.client()
    info = client.create_table(orders_spec(num_buckets=2))
    client.upsert("orders", [{"id": i, "amount": 1.0} for i in range(10)])
    ends = {b.bucket: b.log_end_offset for b in client.log_info("orders").buckets}
    assert client.get_lake("orders") is None

    client.report_lake("orders", LakeReport(table_id=info.table_id, epoch=3, lake_version=1, buckets={"0": ends[0]}))
    with pytest.raises(FencedEpochError) as fenced:
        client.report_lake("orders", LakeReport(table_id=info.table_id, epoch=2, lake_version=9, buckets={"0": 0}))
    assert fenced.value.table == "orders"
    assert client.get_lake("orders").lake_version == 1

    newer = LakeReport(table_id=info.table_id, epoch=4, lake_version=2, buckets={"0": ends[0], "1": ends[1]})
    client.report_lake("orders", newer)
    assert client.get_lake("orders") == newer
    with pytest.raises(FencedEpochError):
        client.report_lake("orders", LakeReport(table_id=info.table_id, epoch=3, lake_version=3, buckets={}))

    with pytest.raises(ConflictError) as stale_table:  # a report naming another table_id is a conflict, not a fence
        client.report_lake("orders", LakeReport(table_id=info.table_id + 1, epoch=9, lake_version=3, buckets={}))
    assert not isinstance(stale_table.value, FencedEpochError)


def test_a_lake_report_of_another_job_is_refused_and_the_holders_report_stays(emptied_kv_store):
    client = emptied_kv_store.client()
    info = client.create_table(orders_spec(num_buckets=2))
    client.upsert("orders", [{"id": i, "amount": 1.0} for i in range(10)])
    ends = {str(b.bucket): b.log_end_offset for b in client.log_info("orders").buckets}

    def report(job: str | None, epoch: int, version: int) -> LakeReport:
        return LakeReport(table_id=info.table_id, epoch=epoch, lake_version=version, buckets=ends, job=job)

    client.report_lake("orders", report(None, 1, 1))  # an older client's report: as it always was
    assert client.get_lake("orders") == report(None, 1, 1) and client.logs()["orders"].lake_job is None
    lake_url = f"{emptied_kv_store.url}/v1/tables/orders/lake"
    assert "job" not in requests.get(lake_url, timeout=10).json(), "what an older client's strict model reads"
    client.report_lake("orders", report("first", 7, 2))  # a job naming itself takes an unnamed report on
    # another job's epochs are its own: a lower one is no zombie, a higher one no newer leader
    for epoch in (3, 9):
        with pytest.raises(ConflictError) as other:
            client.report_lake("orders", report("second", epoch, 5))
        assert not isinstance(other.value, FencedEpochError) and other.value.code == "OTHER_JOB"
        assert other.value.status == 409 and other.value.table == "orders"
        assert all(
            part in str(other.value)
            for part in ("'orders'", "job 'second'", "job 'first'", "DELETE /v1/tables/orders/lake")
        )
    refused = client.report_lakes({"orders": report("second", 9, 5)})["orders"]
    assert isinstance(refused, ConflictError) and refused.code == "OTHER_JOB", "the batch answers the same, per table"
    assert client.get_lake("orders") == report("first", 7, 2)
    assert (client.logs()["orders"].lake_job, client.lake_holders(["orders", "nope"])) == ("first", {"orders": "first"})

    client.report_lake("orders", report("first", 7, 3))  # the holder still reports, fenced as before
    with pytest.raises(FencedEpochError):
        client.report_lake("orders", report("first", 6, 4))
    unnamed = requests.put(lake_url, json=report(None, 8, 4).model_dump(exclude_none=True), timeout=10)
    assert unnamed.json() == report("first", 8, 4).model_dump(exclude_none=True), (
        "an older client of the holder's: still the holder's"
    )
    assert client.get_lake("orders") == report("first", 8, 4)

    # a drop naming a report the holder has moved past drops nothing; one naming half of it is bad input
    with pytest.raises(ConflictError) as moved:
        client.drop_lake("orders", report("first", 7, 3))
    assert moved.value.code == "CONFLICT" and "job 'first' reported since (epoch 8, lake version 4" in str(moved.value)
    half = requests.delete(lake_url, params={"epoch": 8}, timeout=10)
    assert half.status_code == 400 and "epoch and lake_version: give both" in half.json()["message"]
    assert client.get_lake("orders") == report("first", 8, 4)
    # the hand-over: the report dropped, the next job's report holds the table, whatever its epoch
    assert client.drop_lake("orders", report("first", 8, 4)) == report("first", 8, 4)
    assert client.get_lake("orders") is None and client.logs()["orders"].lake is None
    with pytest.raises(NotFoundError):
        client.drop_lake("orders")
    client.report_lake("orders", report("second", 1, 1))
    with pytest.raises(ConflictError):
        client.report_lake("orders", report("first", 9, 5))
    assert client.lake_holders(["orders"]) == {"orders": "second"}
    assert client.drop_lake("orders") == report("second", 1, 1), "a drop naming no report drops the one held"
    with pytest.raises(TableNotFoundError):
        client.drop_lake("nope")


def test_dropped_table_files_go_unless_leased_and_ids_are_never_reused(store_factory):
    store = store_factory(num_retained=2, gc_interval_s=0.2)
    client = store.client()
    table_id, snaps = _three_snapshots(client)
    client.acquire_lease(
        "job", epoch=1, duration_ms=60_000, snapshots=[SnapshotRef(table_id=table_id, bucket=0, snapshot_id=3)]
    )
    client.drop_table("orders")
    recreated = client.create_table(orders_spec())
    assert recreated.table_id > table_id
    assert client.log_info("orders").buckets[0].log_end_offset == 0

    wait_gc_passes(client)
    assert not Path(snaps[1].files[0]).exists()
    assert Path(snaps[2].files[0]).exists()  # held by the lease even though its table is gone
    client.drop_lease("job", epoch=1)
    wait_until(lambda: not Path(snaps[2].files[0]).exists(), "the dropped table's leased snapshot to go", **STORE_PACE)
