"""Which lake files a round rewrites for its changes, and which changes land in each rewrite."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tiering.delta_log.lake import LakeFile
from tiering.kvstore.protocol import DELETE, INSERT, OP_COLUMN, UPDATE
from tiering.writers.buckets import rewrite_groups

pytestmark = pytest.mark.unit


def files(*ranges: tuple[int | None, int | None]) -> list[LakeFile]:
    return [LakeFile(f"/t/{i}", f"f{i}", 100, 10, low, high) for i, (low, high) in enumerate(ranges)]


def changes(*ops: tuple[int, str]) -> pa.Table:
    return pa.table({"id": pa.array([k for k, _ in ops], pa.int64()), OP_COLUMN: [op for _, op in ops]})


def groups(lake: list[LakeFile], *ops: tuple[int, str]) -> list[tuple[list[str], list[int]]]:
    """Per group: its files' paths and the keys of the changes landing in it, sorted."""
    return [
        (sorted(f.path for f in g.files), sorted(g.changes["id"].to_pylist()))
        for g in rewrite_groups(lake, changes(*ops), "id")
    ]


SORTED = files((0, 9), (10, 19), (20, 29))


def test_only_the_files_whose_range_holds_a_changed_key_are_rewritten():
    assert groups(SORTED, (12, UPDATE), (15, DELETE)) == [(["f1"], [12, 15])]
    assert groups(SORTED, (3, UPDATE), (29, DELETE)) == [(["f0"], [3]), (["f2"], [29])]


def test_a_new_key_no_range_covers_joins_the_nearest_file_and_a_delete_of_one_is_dropped():
    lake = files((0, 9), (20, 29))
    assert groups(lake, (12, INSERT)) == [(["f0"], [12])]
    assert groups(lake, (17, INSERT)) == [(["f1"], [17])]
    assert groups(lake, (100, INSERT), (-5, INSERT)) == [(["f0"], [-5]), (["f1"], [100])]
    assert groups(lake, (14, DELETE)) == []


def test_overlapping_ranges_are_rewritten_together_and_every_covering_file_is_rewritten():
    lake = files((0, 50), (10, 19), (60, 70))  # a byte-copied unsorted file spans the first two
    assert groups(lake, (15, UPDATE)) == [(["f0", "f1"], [15])]
    assert groups(lake, (30, DELETE)) == [(["f0"], [30])]


def test_a_file_without_a_range_makes_the_whole_bucket_one_rewrite():
    lake = files((0, 9), (None, None))
    assert groups(lake, (3, UPDATE)) == [(["f0", "f1"], [3])]


def test_no_change_no_rewrite():
    assert rewrite_groups(SORTED, changes(), "id") == []
