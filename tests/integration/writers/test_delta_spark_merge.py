"""delta-spark's MERGE path (``lake.delta_spark_write = "merge"``) against real Delta tables and
local Spark with the Delta jars (scripts/test_delta.sh): a small change to a bigger table writes a
deletion vector and only the changed rows, its change feed is the round's changes as Spark's
``readChangeFeed`` reads them, a commit that landed but raised is not written twice, and the
delta-rs writer, whose rewrite would not apply the vectors, refuses the table, and maintenance
(delta-rs's vacuum) keeps the vectors' files.
The round protocol every writer follows runs on this path in test_round_writers.py."""

from __future__ import annotations

import json
import os
import time
from decimal import Decimal
from pathlib import Path

import pytest

from tests.support.delta_spark import DeltaReader
from tests.support.store_files import ts, write_log, write_snapshot
from tests.support.writers import JOB, ORDERS, commit, log_entry, orders_rows, row, skip_without_delta_jars
from tiering.conf.model import MaintenanceConfig
from tiering.delta_log.lake import Lake, has_deletion_vectors
from tiering.delta_log.layout import app_id, txn_version
from tiering.enumerator.splits import LogSplit, SnapshotSplit
from tiering.errors import ConfigError, LakeCommitError
from tiering.writers.delta_rs_writer import DeltaRsRoundWriter
from tiering.writers.delta_spark_writer import DeltaSparkRoundWriter
from tiering.writers.maintenance import LakeMaintainer

pytestmark = [pytest.mark.integration, pytest.mark.delta_jars]

#: Rows of the bigger bucket: enough that a rewrite of its file would show.
ROWS = 2000


@pytest.fixture
def lake(tmp_path) -> Lake:
    return Lake.at(str(tmp_path / "lake"))


@pytest.fixture
def writer(spark, lake) -> DeltaSparkRoundWriter:
    skip_without_delta_jars(spark)
    return DeltaSparkRoundWriter(spark, lake, JOB, change_data_feed=True)


@pytest.fixture
def bootstrapped(writer, tmp_path) -> dict[int, tuple]:
    """Round 1: bucket 0 holds ``ROWS`` rows, bucket 1 one; the lake's rows as orders_rows reads them."""
    store = tmp_path / "store"
    big = write_snapshot(store, ORDERS, [(row(i, f"n{i}"), i % 7) for i in range(ROWS)])
    small = write_snapshot(store, ORDERS, [(row(100_000, "other"), 3)])
    files = {
        SnapshotSplit("orders", 0, 1, snapshot_id=1, log_offset=10): [big],
        SnapshotSplit("orders", 1, 1, snapshot_id=1, log_offset=4): [small],
    }
    result = commit(writer, files)
    assert not result.skipped and result.delta_version == 0
    return orders_rows(writer.lake)


def changes_round(tmp_path) -> dict:
    """Round 2 of bucket 0: an update, a delete, an insert, and a key updated then deleted."""
    log = write_log(
        tmp_path / "store2",
        ORDERS,
        [
            (10, "+U", row(5, "five", "5.00")),
            (11, "-D", {"id": 7}),
            (12, "+I", row(5000, "new")),
            (13, "+U", row(9, "nine")),
            (14, "-D", {"id": 9}),
        ],
    )
    return {LogSplit("orders", 0, 1, 10, 15): [log]}


def expected_after(before: dict[int, tuple]) -> dict[int, tuple]:
    rows = {k: v for k, v in before.items() if k not in (7, 9)}
    rows[5] = (0, "five", Decimal("5.00"), 10, ts(10))
    rows[5000] = (0, "new", Decimal("1.00"), 12, ts(12))
    return rows


def test_a_small_change_to_a_bigger_table_writes_a_deletion_vector_not_the_file(
    writer, lake, bootstrapped, tmp_path, spark
):
    assert has_deletion_vectors(lake.load("orders").dt), "the table was created with deletion vectors on"
    untouched = {u for u in lake.load("orders").dt.file_uris() if "__bucket=1/" in u}

    result = commit(writer, changes_round(tmp_path), round_id=2)

    assert not result.skipped and result.delta_version == 1 and result.positions == {0: 15, 1: 4}
    assert orders_rows(lake) == expected_after(bootstrapped)
    spark_rows = DeltaReader(spark).rows(lake, "orders")
    assert {k: (r["name"], r["__offset"]) for k, r in spark_rows.items()} == {
        k: (v[1], v[3]) for k, v in expected_after(bootstrapped).items()
    }
    entry = log_entry(lake, 1)
    (info,) = entry["commitInfo"]
    assert info["operation"] == "MERGE" and '"round": 2' in info["userMetadata"]
    (txn,) = entry["txn"]
    assert (txn["appId"], txn["version"]) == (app_id(JOB, "orders"), txn_version(1, 2))
    removed = {r["path"] for r in entry["remove"]}
    with_vector = [a for a in entry["add"] if a.get("deletionVector")]
    new_files = [a for a in entry["add"] if a["path"] not in removed]
    assert {a["path"] for a in with_vector} == removed and all("__bucket=0/" in p for p in removed)
    assert sum(a["deletionVector"]["cardinality"] for a in with_vector) == 3, "rows 5, 7 and 9 deleted in place"
    # only the changed rows are written: the update and the insert, not the bucket's other rows
    assert sum(_records(a) for a in new_files) == 2
    assert {u for u in lake.load("orders").dt.file_uris() if "__bucket=1/" in u} == untouched


def test_the_change_feed_of_a_merge_round_is_its_changes(writer, lake, bootstrapped, tmp_path, spark):
    commit(writer, changes_round(tmp_path), round_id=2)

    feed = DeltaReader(spark).feed(lake, "orders", 1)
    assert sorted((c["id"], c["_change_type"], c["name"]) for c in feed) == [
        (5, "update_postimage", "five"),
        (5, "update_preimage", "n5"),
        (7, "delete", "n7"),
        (9, "delete", "n9"),
        (5000, "insert", "new"),
    ]
    assert {c["_commit_version"] for c in feed} == {1}


def test_a_merge_that_landed_but_raised_is_not_written_again_when_replayed(spark, lake, bootstrapped, tmp_path):
    before, files = lake.load("orders"), changes_round(tmp_path)

    class CrashingAfterTheCommit(DeltaSparkRoundWriter):
        def _commit(self, prepared, written):
            super()._commit(prepared, written)
            raise RuntimeError("driver lost after the commit")

    with pytest.raises(RuntimeError, match="after the commit"):
        commit(CrashingAfterTheCommit(spark, lake, JOB), files, round_id=2)
    replayed = DeltaSparkRoundWriter(spark, lake, JOB)
    # the round planned again on the table as it was before: Delta's own txn check skips the MERGE
    again = replayed.write_table_round(ORDERS, list(files), files, before, epoch=1, round_id=2, lease_id="lease-1")

    assert again.delta_version == 1 and lake.load("orders").dt.version() == 1
    assert orders_rows(lake) == expected_after(bootstrapped)
    assert commit(replayed, files, round_id=2).skipped


def test_maintenance_keeps_the_deletion_vectors_a_table_reads(writer, lake, bootstrapped, tmp_path):
    commit(writer, changes_round(tmp_path), round_id=2)
    then = time.time() - 48 * 3600  # every file past the retention, the vectors' too
    for f in Path(lake.path("orders")).rglob("*"):
        os.utime(f, (then, then))

    config = MaintenanceConfig(min_files=100, checkpoint_interval=5, file_retention_hours=24)
    LakeMaintainer(lake, JOB, config, epoch=1).maintain("orders")

    assert list(Path(lake.path("orders")).glob("deletion_vector_*.bin")), "the vectors the table reads are kept"
    assert orders_rows(lake) == expected_after(bootstrapped)


def test_the_delta_rs_writer_refuses_a_round_on_a_table_with_deletion_vectors(spark, lake, bootstrapped, tmp_path):
    with pytest.raises(LakeCommitError, match='deletion vectors .* lake.writer = "delta-spark"'):
        commit(DeltaRsRoundWriter(spark, lake, JOB), changes_round(tmp_path), round_id=2)
    assert lake.load("orders").dt.version() == 0 and orders_rows(lake) == bootstrapped


def test_the_change_feed_needs_the_merge_path(spark, lake):
    skip_without_delta_jars(spark)
    with pytest.raises(ConfigError, match='needs lake.delta_spark_write = "merge"'):
        DeltaSparkRoundWriter(spark, lake, JOB, write="replace", change_data_feed=True)


def _records(add: dict) -> int:
    return int(json.loads(add["stats"])["numRecords"])
