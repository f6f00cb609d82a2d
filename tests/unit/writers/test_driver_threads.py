"""When a round the driver writes spreads its buckets over threads."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest

from tiering.delta_log.lake import Lake, LakeFile
from tiering.kvstore.models import TableInfo
from tiering.kvstore.reference import store_table
from tiering.writers import delta_rs_writer
from tiering.writers.bucket_plan import BucketBase, BucketPlan, heavy
from tiering.writers.buckets import BucketResult
from tiering.writers.delta_rs_writer import DRIVER_BIG_TABLES, DeltaRsRoundWriter
from tiering.writers.round_writer import PreparedRound, WritePath

pytestmark = pytest.mark.unit

MIB = 1024 * 1024


def bucket(b: int, changes: int, *file_sizes: int) -> BucketPlan:
    files = tuple(LakeFile(f"/lake/t/f{b}-{i}", f"f{b}-{i}", size, 10, 0, 9) for i, size in enumerate(file_sizes))
    return BucketPlan(b, BucketBase.LAKE, tuple(f.uri for f in files), ("/log",), 10, 10 + changes, lake_files=files)


def test_a_few_changes_in_small_files_stay_on_one_thread():
    assert not heavy([bucket(b, 3, 2000) for b in range(4)])


def test_many_changes_get_threads():
    assert heavy([bucket(0, 6000, 2000), bucket(1, 4000, 2000)])


def test_a_few_changes_into_big_files_get_threads():
    """1,000 changes spread over 8 buckets of 17 files of 1 MiB: each a rewrite of tens of ms."""
    plans = [bucket(b, 125, *[MIB] * 17) for b in range(8)]
    assert heavy(plans)
    assert not heavy([bucket(0, 125, 4 * MIB), bucket(1, 125, 3 * MIB)])


def test_the_driver_writes_two_tables_big_rounds_at_a_time(tmp_path, monkeypatch):
    """32 table threads on S3 must not mean 32 big rewrites of four threads each in memory."""
    running: dict[str, int] = {}
    most = {"tables": 0, "rewrites": 0}
    lock = threading.Lock()

    def rewrite(task):
        with lock:
            running[task.table.name] = running.get(task.table.name, 0) + 1
            most["tables"] = max(most["tables"], len(running))
            most["rewrites"] = max(most["rewrites"], sum(running.values()))
        time.sleep(0.05)
        with lock:
            running[task.table.name] -= 1
            if not running[task.table.name]:
                del running[task.table.name]
        return BucketResult(task.table.name, task.plan.bucket)

    monkeypatch.setattr(delta_rs_writer, "run_task", rewrite)
    spark = SimpleNamespace(conf=SimpleNamespace(set=lambda key, value: None))  # no Spark job runs here
    writer = DeltaRsRoundWriter(spark, Lake.at(str(tmp_path)), "j")

    def big_round(name: str) -> PreparedRound:
        table = store_table(
            TableInfo(
                name=name, table_id=1, num_buckets=4, primary_key=["id"], schema=[{"name": "id", "type": "bigint"}]
            )
        )
        return PreparedRound(
            table,
            f"{tmp_path}/{name}",
            "app",
            1,
            1,
            None,
            False,
            tuple(bucket(b, 5000, MIB) for b in range(4)),
            {},
            {},
            write_path=WritePath.DRIVER,
        )

    with ThreadPoolExecutor(8) as tables:
        results = list(tables.map(lambda n: writer._driver_writes(big_round(f"t{n}")), range(8)))

    assert [len(r) for r in results] == [4] * 8
    assert most == {"tables": DRIVER_BIG_TABLES, "rewrites": DRIVER_BIG_TABLES * 4}
