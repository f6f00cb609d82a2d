"""GC collects table by table: one transaction each, so a failure stays in its table and other
tables' calls proceed between two; what GC keeps (leased, newest, untiered) holds table by table."""

from __future__ import annotations

import sqlite3
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from tiering.kvstore.models import AcquireRequest, LakeReport, Snapshot, SnapshotRef, TableInfo, TableSpec
from tiering.kvstore.server import catalog
from tiering.kvstore.server.errors import SNAPSHOT_GONE, ApiError
from tiering.kvstore.server.gc import Collector
from tiering.kvstore.server.store import Store

pytestmark = pytest.mark.integration


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store(tmp_path, num_retained=1)
    yield store
    store.close()


def _three_tiered_snapshots(store: Store, name: str) -> tuple[TableInfo, list[Snapshot], list[str]]:
    """Snapshots 1..3 of a one-bucket table, each after one more row; all three log segments
    are covered by snapshot 3 and reported to the lake, so GC may take them."""
    info = store.create_table(
        TableSpec(name=name, schema=[{"name": "id", "type": "bigint"}], primary_key=["id"], num_buckets=1)
    )
    snaps = []
    for i in range(3):
        store.write_rows(name, "upsert", pa.table({"id": pa.array([i], pa.int64())}))
        snaps.append(store.take_snapshots(name).buckets[0])
    store.put_lake(name, LakeReport(table_id=info.table_id, epoch=1, lake_version=1, buckets={"0": 3}))
    segments = [s.file for s in store.log_segments(name, 0, 0, 3)]
    assert [s.snapshot_id for s in snaps] == [1, 2, 3] and len(segments) == 3
    return info, snaps, segments


def _snapshot_ids(store: Store, name: str) -> list[int]:
    present = []
    for snapshot_id in (1, 2, 3):
        try:
            store.get_snapshot(name, 0, snapshot_id)
            present.append(snapshot_id)
        except ApiError as e:
            assert (e.status, e.code) == (410, SNAPSHOT_GONE)
    return present


def _hold(store: Store, lease_id: str, info: TableInfo, snapshot_id: int) -> None:
    ref = SnapshotRef(table_id=info.table_id, bucket=0, snapshot_id=snapshot_id)
    held = store.acquire_lease(lease_id, AcquireRequest(epoch=1, duration_ms=60_000, snapshots=[ref]))
    assert held.unavailable == []


def test_a_table_that_fails_keeps_everything_and_the_others_are_collected(store, monkeypatch):
    a, a_snaps, a_segments = _three_tiered_snapshots(store, "a")
    b, b_snaps, b_segments = _three_tiered_snapshots(store, "b")
    _, c_snaps, _ = _three_tiered_snapshots(store, "c")
    _hold(store, "job", a, 1)

    cut_segments = catalog.delete_segments_below

    def failing_for_b(conn: sqlite3.Connection, table_id: int, bucket: int, end_offset: int) -> None:
        if table_id == b.table_id:  # after b's snapshot rows were deleted in the same transaction
            raise sqlite3.OperationalError("disk I/O error")
        cut_segments(conn, table_id, bucket, end_offset)

    monkeypatch.setattr(catalog, "delete_segments_below", failing_for_b)
    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
        store.gc()

    assert _snapshot_ids(store, "a") == [1, 3]  # 1 leased, 3 the newest
    assert [Path(s.files[0]).exists() for s in a_snaps] == [True, False, True]
    assert store.log_info("a").buckets[0].log_start_offset == 3
    assert not any(Path(f).exists() for f in a_segments)
    assert _snapshot_ids(store, "b") == [1, 2, 3]  # rolled back: rows and files intact
    assert all(Path(s.files[0]).exists() for s in b_snaps)
    assert store.log_info("b").buckets[0].log_start_offset == 0
    assert all(Path(f).exists() for f in b_segments)
    assert _snapshot_ids(store, "c") == [3]  # after the failed table, the pass went on
    assert [Path(s.files[0]).exists() for s in c_snaps] == [False, False, True]

    monkeypatch.setattr(catalog, "delete_segments_below", cut_segments)
    assert store.gc() == {"leases": 0, "snapshots": 2, "segments": 3, "tables": 0}
    assert _snapshot_ids(store, "b") == [3]
    assert store.log_info("b").buckets[0].log_start_offset == 3
    assert not any(Path(f).exists() for f in b_segments)


def test_calls_on_other_tables_proceed_between_tables_and_their_leases_count(store, monkeypatch):
    _three_tiered_snapshots(store, "a")
    b, b_snaps, b_segments = _three_tiered_snapshots(store, "b")
    collect_table = Collector._collect_table
    between: list[str] = []

    def then_work_on_b(self: Collector, info: TableInfo, now_ms: int) -> Counter[str]:
        counts = collect_table(self, info, now_ms)
        if info.name == "a":

            def on_b() -> None:  # another request thread, while the pass is between a and b
                _hold(store, "late-job", b, 1)
                store.write_rows("b", "upsert", pa.table({"id": pa.array([9], pa.int64())}))
                between.append("done")

            worker = threading.Thread(target=on_b)
            worker.start()
            worker.join(timeout=10)
            assert between == ["done"], "a call on table b waited for the GC pass"
        return counts

    monkeypatch.setattr(Collector, "_collect_table", then_work_on_b)
    assert store.gc() == {"leases": 0, "snapshots": 3, "segments": 6, "tables": 0}

    assert _snapshot_ids(store, "a") == [3]
    assert _snapshot_ids(store, "b") == [1, 3]  # leased after the pass started: kept
    assert [Path(s.files[0]).exists() for s in b_snaps] == [True, False, True]
    log = store.log_info("b").buckets[0]
    assert (log.log_start_offset, log.log_end_offset) == (3, 4)  # the new write: untiered, not covered
    assert [(s.start_offset, s.end_offset) for s in store.log_segments("b", 0, 3, 4)] == [(3, 4)]
    assert not any(Path(f).exists() for f in b_segments)
