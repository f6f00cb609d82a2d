"""What the store promised survives kill -9: tables and ids, offsets, snapshots, leases, lake reports."""

from __future__ import annotations

import signal

import pyarrow.parquet as pq
import pytest

from tests.support.store import orders_spec
from tiering.kvstore.models import LakeReport, SnapshotRef

pytestmark = pytest.mark.integration


def test_state_survives_kill_9_and_restart(store_factory):
    store = store_factory(gc_interval_s=0.2)
    client = store.client()
    client.create_table(orders_spec("dropped"))
    client.drop_table("dropped")
    info = client.create_table(orders_spec(num_buckets=3))
    client.upsert("orders", [{"id": i, "amount": float(i), "note": "v1"} for i in range(30)])
    snapshots = client.take_snapshots("orders")
    client.upsert("orders", [{"id": i, "amount": -1.0, "note": "v2"} for i in range(5)])
    log_before = client.log_info("orders")
    refs = [SnapshotRef(table_id=info.table_id, bucket=s.bucket, snapshot_id=s.snapshot_id) for s in snapshots.buckets]
    lease = client.acquire_lease("job", epoch=4, duration_ms=600_000, snapshots=refs)
    # Offsets 0: a report of what is tiered would let GC (every 0.2 s, before and after the kill)
    # move the log start under the comparison below.
    report = LakeReport(
        table_id=info.table_id, epoch=4, lake_version=7, buckets={str(b.bucket): 0 for b in log_before.buckets}
    )
    client.report_lake("orders", report)

    store.kill(signal.SIGKILL)
    store.restart()

    assert client.list_tables() == [info]
    assert client.log_info("orders") == log_before
    assert client.latest_snapshots("orders") == snapshots
    restored = client.get_lease("job")
    assert (restored.epoch, restored.expires_at_ms, restored.snapshots) == (
        lease.epoch,
        lease.expires_at_ms,
        lease.snapshots,
    )
    assert client.get_lake("orders") == report

    # The restarted store rebuilt which keys exist: re-upserting old keys gives +U, new keys +I,
    # and offsets continue densely where they stopped.
    client.upsert("orders", [{"id": 0, "amount": 0.5}, {"id": 1000, "amount": 1.0}])
    ops = {}
    for bucket in client.log_info("orders").buckets:
        before = next(b.log_end_offset for b in log_before.buckets if b.bucket == bucket.bucket)
        for seg in client.log_segments("orders", bucket.bucket, before, bucket.log_end_offset):
            assert seg.start_offset == before
            ops.update({r["id"]: r["__op"] for r in pq.read_table(seg.file).to_pylist()})
    assert ops == {0: "+U", 1000: "+I"}
    recreated = client.create_table(orders_spec("dropped"))
    assert recreated.table_id > info.table_id  # ids are never reused, across restarts too
