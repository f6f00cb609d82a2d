"""One bucket's files as an executor writes them: copied, rewritten (whole or by file), or refused
(local and S3)."""

from __future__ import annotations

import dataclasses
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.store_files import write_log, write_snapshot
from tests.support.tables import kv_table
from tiering.delta_log.lake import LakeFile
from tiering.kvstore.contract import StoreTable
from tiering.objectstore.object_store import ObjectStore
from tiering.writers.bucket_plan import BucketBase, BucketPlan
from tiering.writers.buckets import BucketTask, file_schema, run_task, write_bucket

pytestmark = pytest.mark.integration

TABLE = kv_table({"id": "bigint", "v": "string"}, num_buckets=2)


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path) -> ObjectStore:
    if request.param == "local":
        return ObjectStore.of(str(tmp_path / "lake"))
    return ObjectStore.of(request.getfixturevalue("s3_root"), request.getfixturevalue("s3_server").storage_options())


def task(store: ObjectStore, plan: BucketPlan, table: StoreTable = TABLE) -> BucketTask:
    return BucketTask(table, store.uri(table.name), plan, store)


def read(store: ObjectStore, written) -> list[dict]:
    rows = []
    for f in written:
        with store.filesystem.open_input_file(store.path(f"{store.uri('t')}/{f.path}")) as handle:
            rows += pq.read_table(handle).to_pylist()
    return sorted(rows, key=lambda r: r["id"])


def test_a_snapshot_bucket_with_nothing_on_top_is_copied_byte_for_byte(store, tmp_path):
    snap = write_snapshot(tmp_path / "s", TABLE, [({"id": 5, "v": "a"}, 0), ({"id": 2, "v": None}, 1)])
    plan = BucketPlan(
        bucket=1, base=BucketBase.SNAPSHOT, base_files=(snap,), log_files=(), log_from=2, log_to=2, snapshot_id=3
    )

    (written,) = write_bucket(task(store, plan))

    with store.filesystem.open_input_file(store.path(f"{store.uri('t')}/{written.path}")) as copied:
        assert copied.read() == open(snap, "rb").read()
    assert written.path.startswith("__bucket=1/") and written.num_records == 2
    stats = json.loads(written.stats)
    assert stats == {
        "numRecords": 2,
        "minValues": {"id": 2, "__offset": 0},
        "maxValues": {"id": 5, "__offset": 1},
        "nullCount": {"id": 0, "__offset": 0},
    }
    assert written.add_action().partition_values == {"__bucket": "1"}


def test_changes_on_a_snapshot_are_applied_newest_first(store, tmp_path):
    snap = write_snapshot(
        tmp_path / "s", TABLE, [({"id": 1, "v": "a"}, 0), ({"id": 2, "v": "b"}, 1), ({"id": 3, "v": "c"}, 2)]
    )
    log = write_log(
        tmp_path / "l",
        TABLE,
        [
            (2, "+U", {"id": 3, "v": "before the range"}),
            (3, "+U", {"id": 1, "v": "a2"}),
            (4, "-D", {"id": 2}),
            (5, "+I", {"id": 4, "v": "d"}),
            (6, "+U", {"id": 4, "v": "d2"}),
        ],
    )
    plan = BucketPlan(
        bucket=0, base=BucketBase.SNAPSHOT, base_files=(snap,), log_files=(log,), log_from=3, log_to=7, snapshot_id=1
    )

    written = write_bucket(task(store, plan))

    assert [(r["id"], r["v"], r["__offset"]) for r in read(store, written)] == [(1, "a2", 3), (3, "c", 2), (4, "d2", 6)]
    assert sum(f.num_records for f in written) == 3


def test_a_snapshot_from_before_a_new_column_is_rewritten_with_nulls(store, tmp_path):
    old = dataclasses.replace(TABLE, columns=TABLE.columns[:1])
    snap = write_snapshot(tmp_path / "s", old, [({"id": 1}, 0)])
    plan = BucketPlan(
        bucket=0, base=BucketBase.SNAPSHOT, base_files=(snap,), log_files=(), log_from=1, log_to=1, snapshot_id=1
    )

    written = write_bucket(task(store, plan))

    assert [(r["id"], r["v"]) for r in read(store, written)] == [(1, None)]
    with store.filesystem.open_input_file(store.path(f"{store.uri('t')}/{written[0].path}")) as handle:
        assert pq.read_schema(handle).equals(file_schema(TABLE), check_metadata=False)


def test_the_kept_rows_and_the_upserts_go_into_one_row_group(store, tmp_path):
    snap = write_snapshot(tmp_path / "s", TABLE, [({"id": i, "v": "a"}, i) for i in range(10)])
    log = write_log(tmp_path / "l", TABLE, [(10, "+U", {"id": 3, "v": "b"}), (11, "+I", {"id": 42, "v": "c"})])
    plan = BucketPlan(
        bucket=0, base=BucketBase.SNAPSHOT, base_files=(snap,), log_files=(log,), log_from=10, log_to=12, snapshot_id=1
    )

    (written,) = write_bucket(task(store, plan))

    with store.filesystem.open_input_file(store.path(f"{store.uri('t')}/{written.path}")) as handle:
        meta = pq.read_metadata(handle)
    assert (meta.num_row_groups, meta.num_rows, written.num_records) == (1, 11, 11)
    assert {r["id"]: r["v"] for r in read(store, [written])}[3] == "b"


def test_a_bucket_that_ends_up_empty_writes_no_file(store, tmp_path):
    log = write_log(tmp_path / "l", TABLE, [(0, "+I", {"id": 1, "v": "a"}), (1, "-D", {"id": 1})])
    plan = BucketPlan(bucket=0, base=BucketBase.EMPTY, base_files=(), log_files=(log,), log_from=0, log_to=2)

    assert write_bucket(task(store, plan)) == []


def test_a_file_of_another_type_fails_the_task_as_a_result_naming_the_bucket(store, tmp_path):
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"id": ["not a number"], "v": ["x"]}), bad)
    plan = BucketPlan(
        bucket=1, base=BucketBase.SNAPSHOT, base_files=(str(bad),), log_files=(), log_from=0, log_to=0, snapshot_id=1
    )

    result = run_task(task(store, plan))

    assert result.files == () and result.error.startswith("bucket 1: ")


def test_a_lake_bucket_rewrites_only_the_files_whose_range_holds_a_change_sorted_and_split(store, tmp_path):
    snaps = [
        write_snapshot(tmp_path / "s", TABLE, [({"id": i, "v": "a"}, i) for i in ids])
        for ids in ([0, 1, 2, 3], [10, 11, 12, 13], [20, 21, 22, 23])
    ]
    copied = write_bucket(task(store, BucketPlan(0, BucketBase.SNAPSHOT, tuple(snaps), (), 24, 24)))
    lake = tuple(
        LakeFile(f"{store.uri('t')}/{f.path}", f.path, f.size, f.num_records, low, high)
        for f, (low, high) in zip(copied, [(0, 3), (10, 13), (20, 23)], strict=False)
    )
    log = write_log(
        tmp_path / "l",
        TABLE,
        [(24, "+U", {"id": 12, "v": "b"}), (25, "+I", {"id": 15, "v": "new"}), (26, "-D", {"id": 30})],
    )
    plan = BucketPlan(0, BucketBase.LAKE, tuple(f.uri for f in lake), (log,), 24, 27, lake_files=lake)

    result = run_task(BucketTask(TABLE, store.uri("t"), plan, store, target_file_bytes=1))

    assert result.error is None and result.replaced == (copied[1].path,), "12 and the new 15 land in the middle file"
    assert [r["id"] for r in read(store, result.files)] == [10, 11, 12, 13, 15]
    assert [f.num_records for f in result.files] == [1] * 5, "a file per row at a 1-byte target"
    assert [json.loads(f.stats)["minValues"]["id"] for f in result.files] == [10, 11, 12, 13, 15]


def test_rows_too_big_to_sort_in_memory_stream_through_unsorted_split_at_the_target(store, tmp_path, monkeypatch):
    monkeypatch.setattr("tiering.writers.buckets.rewrite.SORT_MAX_BYTES", 0)
    snap = write_snapshot(tmp_path / "s", TABLE, [({"id": i, "v": "a"}, o) for o, i in enumerate([5, 1, 4])])
    log = write_log(tmp_path / "l", TABLE, [(3, "+U", {"id": 4, "v": "b"}), (4, "+I", {"id": 0, "v": "c"})])
    plan = BucketPlan(
        bucket=0, base=BucketBase.SNAPSHOT, base_files=(snap,), log_files=(log,), log_from=3, log_to=5, snapshot_id=1
    )

    written = write_bucket(BucketTask(TABLE, store.uri("t"), plan, store, target_file_bytes=1))

    assert [r["id"] for f in written for r in read(store, [f])] == [5, 1, 4, 0], "as read: kept rows, then upserts"
    assert [f.num_records for f in written] == [1, 1, 1, 1]
