"""A Spark partition's bucket tasks: the light ones on threads, the heavy ones one at a time,
every task's result returned once (a local lake, real files; no Spark)."""

from __future__ import annotations

import threading
import time

import pyarrow.parquet as pq
import pytest

from tests.support.store_files import write_log, write_snapshot
from tests.support.tables import kv_table
from tiering.delta_log.lake import LakeFile
from tiering.objectstore.object_store import ObjectStore
from tiering.writers.bucket_plan import BucketBase, BucketPlan
from tiering.writers.buckets import BucketTask, light, rewrite, run_task, run_tasks, schedule

pytestmark = pytest.mark.unit

TABLE = kv_table({"id": "bigint", "name": "string"}, num_buckets=8)
MIB = 1024 * 1024


def task(store: ObjectStore, plan: BucketPlan) -> BucketTask:
    return BucketTask(TABLE, store.uri("t"), plan, store)


def lake_file(size: int) -> LakeFile:
    return LakeFile("/lake/t/f", "f", size, 10, 0, 9)


def test_copies_and_small_rewrites_are_light_big_ones_are_not(tmp_path):
    store = ObjectStore.of(str(tmp_path / "lake"))
    assert light(task(store, BucketPlan(0, BucketBase.SNAPSHOT, ("s",), (), 5, 5, snapshot_id=1)))  # a byte copy
    assert not light(
        task(store, BucketPlan(0, BucketBase.SNAPSHOT, ("s",), ("l",), 5, 6, snapshot_id=1))
    )  # decoded, sorted
    assert light(task(store, BucketPlan(0, BucketBase.LAKE, ("f",), ("l",), 5, 8, lake_files=(lake_file(MIB),))))
    assert not light(
        task(store, BucketPlan(0, BucketBase.LAKE, ("f",), ("l",), 5, 8, lake_files=(lake_file(9 * MIB),)))
    )
    assert not light(task(store, BucketPlan(0, BucketBase.EMPTY, (), ("l",), 0, 20_000)))


def test_a_partition_returns_each_tasks_result_once_as_run_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(schedule, "PARTITION_THREADS", 3)
    store = ObjectStore.of(str(tmp_path / "lake"))
    tasks = []
    for b in range(6):  # light: changes into empty buckets; one of them reads a file that is not there
        log = write_log(
            tmp_path / f"log{b}", TABLE, [(0, "+I", {"id": b, "name": f"n{b}"}), (1, "+I", {"id": b + 8, "name": "x"})]
        )
        tasks.append(
            task(store, BucketPlan(b, BucketBase.EMPTY, (), (log if b != 4 else str(tmp_path / "gone.parquet"),), 0, 2))
        )
    snap = write_snapshot(tmp_path / "snap", TABLE, [({"id": 6, "name": "s"}, 0)])
    log = write_log(tmp_path / "log6", TABLE, [(1, "+U", {"id": 6, "name": "s2"})])
    tasks.append(task(store, BucketPlan(6, BucketBase.SNAPSHOT, (snap,), (log,), 1, 2, snapshot_id=1)))  # heavy

    results = list(run_tasks(iter(tasks)))

    assert sorted(r.bucket for r in results) == list(range(7))
    by_bucket = {r.bucket: r for r in results}
    assert "bucket 4" in by_bucket[4].error and "gone.parquet" in by_bucket[4].error
    for b, result in by_bucket.items():
        if b == 4:
            continue
        assert result.error is None
        names = sorted(
            pq.read_table(store.path(f"{store.uri('t')}/{f.path}"))["name"].to_pylist() for f in result.files
        )
        expected = [["s2"]] if b == 6 else [[f"n{b}", "x"]]
        assert names == expected, b
    assert run_task(tasks[4]).error == by_bucket[4].error


def test_snapshots_that_cannot_be_copied_are_decoded_one_at_a_time(tmp_path, monkeypatch):
    """A snapshot taken before a column was added lacks it: not a byte copy, but a rewrite
    of rows of unknown size, so the partition's threads take turns."""
    before = kv_table({"id": "bigint"}, num_buckets=8)
    running, most = 0, 0
    lock = threading.Lock()
    write_rows = rewrite._write_rows

    def counted(*args, **kwargs):
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        try:
            return write_rows(*args, **kwargs)
        finally:
            with lock:
                running -= 1

    monkeypatch.setattr(rewrite, "_write_rows", counted)
    store = ObjectStore.of(str(tmp_path / "lake"))
    tasks = [
        task(
            store,
            BucketPlan(
                b,
                BucketBase.SNAPSHOT,
                (write_snapshot(tmp_path / f"s{b}", before, [({"id": b}, 0)]),),
                (),
                1,
                1,
                snapshot_id=1,
            ),
        )
        for b in range(4)
    ]
    assert all(light(t) for t in tasks), "from the plan alone they look like copies"

    results = sorted(run_tasks(iter(tasks)), key=lambda r: r.bucket)

    assert most == 1
    assert [r.error for r in results] == [None] * 4
    rows = [
        pq.read_table(store.path(f"{store.uri('t')}/{f.path}"), columns=["id", "name"]).to_pylist()
        for r in results
        for f in r.files
    ]
    assert rows == [[{"id": b, "name": None}] for b in range(4)], "the added column reads as nulls"
