"""Log segments are deleted only once tiered (and covered by the bucket's latest snapshot)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from tests.support.store import orders_spec, wait_gc_passes
from tests.support.waiting import STORE_PACE, wait_until
from tiering.errors import SnapshotUnavailableError
from tiering.kvstore.models import LakeReport
from tiering.kvstore.server.store import Store

pytestmark = pytest.mark.integration


def _log_start(client) -> int:
    return client.log_info("orders").buckets[0].log_start_offset


def test_segments_live_until_the_lake_reports_them(store_factory):
    store = store_factory(num_retained=1, gc_interval_s=0.2)
    client = store.client()
    info = client.create_table(orders_spec())
    for i in range(3):
        client.upsert("orders", [{"id": i, "amount": float(i)}])
    client.take_snapshots("orders")
    segments = client.log_segments("orders", 0, 0, 3)
    assert [(s.start_offset, s.end_offset) for s in segments] == [(0, 1), (1, 2), (2, 3)]

    wait_gc_passes(client)  # not tiered yet: nothing goes
    assert client.log_segments("orders", 0, 0, 3) == segments
    assert all(Path(s.file).exists() for s in segments)

    client.report_lake("orders", LakeReport(table_id=info.table_id, epoch=1, lake_version=1, buckets={"0": 2}))
    wait_until(lambda: _log_start(client) == 2, "log start to advance to the lake offset", **STORE_PACE)
    assert client.log_segments("orders", 0, 2, 3) == segments[2:]
    assert [Path(s.file).exists() for s in segments] == [False, False, True]
    with pytest.raises(SnapshotUnavailableError) as truncated:
        client.log_segments("orders", 0, 0, 3)
    assert truncated.value.code == "LOG_TRUNCATED"

    # Tiered but not yet in a snapshot: the store still needs it to rebuild its state.
    client.upsert("orders", [{"id": 9, "amount": 9.0}])
    client.report_lake("orders", LakeReport(table_id=info.table_id, epoch=1, lake_version=2, buckets={"0": 4}))
    wait_gc_passes(client)
    assert _log_start(client) == 3
    client.take_snapshots("orders")
    wait_until(lambda: _log_start(client) == 4, "log start to reach the snapshot-covered lake offset", **STORE_PACE)
    assert client.log_segments("orders", 0, 4, 10) == []


def test_hard_retention_cap_deletes_untiered_segments_once_snapshotted(tmp_path):
    """The cap (``serve(log_retention_s=...)``, off by default) ignores the lake, never the snapshot."""
    store = Store(tmp_path, num_retained=1, log_retention_s=0.0)
    try:
        store.create_table(orders_spec())
        for i in range(2):
            store.write_rows("orders", "upsert", pa.table({"id": pa.array([i], pa.int64())}))
        assert store.gc()["segments"] == 0  # not covered by a snapshot yet
        store.take_snapshots("orders")
        assert store.gc()["segments"] == 2
        assert store.log_info("orders").buckets[0].log_start_offset == 2
    finally:
        store.close()
