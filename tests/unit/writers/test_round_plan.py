"""Per-bucket round plans: bases, trimmed change ranges, gaps and foreign splits."""

from __future__ import annotations

import pytest

from tests.support.tables import kv_table
from tiering.delta_log.lake import LakeFile
from tiering.enumerator.positions import LakePosition
from tiering.enumerator.splits import LogSplit, SnapshotSplit
from tiering.errors import LakeCommitError
from tiering.writers.bucket_plan import BucketBase, BucketPlan, plan_buckets

pytestmark = pytest.mark.unit

T = kv_table({"k": "bigint"}, key=("k",), num_buckets=4, table_id=3)
LAKE = LakePosition(3, {1: 20, 2: 5})
LAKE_FILES = {
    1: [LakeFile("/lake/t/__bucket=1/a.parquet", "__bucket=1/a.parquet", 100, 3, 1, 9)],
    2: [LakeFile("/lake/t/__bucket=2/b.parquet", "__bucket=2/b.parquet", 100, 3, 2, 8)],
}


def plan(files, lake=LAKE):
    return plan_buckets(T, sorted(files, key=lambda s: (s.bucket, s.kind)), files, lake, LAKE_FILES)


def test_each_bucket_gets_its_base_and_the_changes_it_lacks():
    snap = SnapshotSplit("t", 0, 3, snapshot_id=9, log_offset=10)
    files = {
        snap: ["s0"],
        LogSplit("t", 0, 3, 10, 12): ["l0a", "l0b"],
        LogSplit("t", 0, 3, 12, 15): ["l0b", "l0c"],
        LogSplit("t", 1, 3, 18, 25): ["l1"],  # overlaps the lake's 20: trimmed to [20, 25)
        LogSplit("t", 3, 3, 0, 4): ["l3"],
    }
    assert plan(files) == [
        BucketPlan(0, BucketBase.SNAPSHOT, ("s0",), ("l0a", "l0b", "l0c"), 10, 15, snapshot_id=9),
        BucketPlan(
            1, BucketBase.LAKE, ("/lake/t/__bucket=1/a.parquet",), ("l1",), 20, 25, lake_files=tuple(LAKE_FILES[1])
        ),
        BucketPlan(3, BucketBase.EMPTY, (), ("l3",), 0, 4),
    ]
    assert [p.position for p in plan(files)] == [15, 25, 4]


def test_a_lake_bucket_is_rewritten_by_file_and_a_bootstrap_carries_the_files_it_replaces():
    log, snap = LogSplit("t", 1, 3, 20, 25), SnapshotSplit("t", 2, 3, snapshot_id=4, log_offset=30)
    by_file, bootstrap = plan({log: ["l1"], snap: ["s2"]})
    assert (by_file.by_file, by_file.lake_files) == (True, tuple(LAKE_FILES[1]))
    assert (bootstrap.by_file, bootstrap.base_files, bootstrap.lake_files) == (False, ("s2",), tuple(LAKE_FILES[2]))


def test_a_bucket_whose_changes_are_all_in_the_lake_is_not_rewritten():
    [only] = plan({LogSplit("t", 1, 3, 15, 20): ["l1"]})
    assert (only.rewrites, only.position, only.log_files) == (False, 20, ())


@pytest.mark.parametrize(
    "files, message",
    [
        ({LogSplit("t", 2, 3, 6, 9): ["l"]}, "bucket 2: log split starts at offset 6 .* lake base holds only up to 5"),
        ({LogSplit("t", 3, 3, 2, 9): ["l"]}, "bucket 3: log split starts at offset 2 .* empty base holds only up to 0"),
        ({LogSplit("t", 2, 3, 5, 7): ["l"], LogSplit("t", 2, 3, 8, 9): ["m"]}, "offset 8 .* up to 7"),
        ({LogSplit("t", 1, 2, 20, 25): ["l"]}, "does not belong to table 't' \\(table_id 3\\)"),
        ({LogSplit("x", 1, 3, 20, 25): ["l"]}, "does not belong"),
        ({LogSplit("t", 4, 3, 0, 1): ["l"]}, "bucket 4 is outside table 't'"),
        ({LogSplit("t", 1, 3, 20, 25): []}, "no segment files"),
        ({SnapshotSplit("t", 0, 3, 1, 1): ["a"], SnapshotSplit("t", 0, 3, 2, 2): ["b"]}, "two snapshot splits"),
    ],
    ids=[
        "gap-lake",
        "gap-empty",
        "gap-between-splits",
        "table-id",
        "table-name",
        "bucket-range",
        "no-files",
        "two-snapshots",
    ],
)
def test_bad_rounds_are_refused_naming_the_problem(files, message):
    with pytest.raises(LakeCommitError, match=message):
        plan(files)


def test_a_split_without_files_entry_is_named():
    split = LogSplit("t", 1, 3, 20, 25)
    with pytest.raises(LakeCommitError, match="no files given for split"):
        plan_buckets(T, [split], {}, LAKE, LAKE_FILES)


def test_a_replaced_table_plans_from_nothing():
    [only] = plan({SnapshotSplit("t", 1, 3, 4, 8): ["s"]}, lake=None)
    assert (only.base, only.log_from, only.position) == (BucketBase.SNAPSHOT, 8, 8)
