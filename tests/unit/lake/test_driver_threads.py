"""When a round the driver writes spreads its buckets over threads."""

from __future__ import annotations

import pytest

from tiering.lake.round_plan import BucketPlan
from tiering.lake.round_writer import threaded
from tiering.lakestate.lake import LakeFile

pytestmark = pytest.mark.unit

MIB = 1024 * 1024


def bucket(b: int, changes: int, *file_sizes: int) -> BucketPlan:
    files = tuple(LakeFile(f"/lake/t/f{b}-{i}", f"f{b}-{i}", size, 10, 0, 9) for i, size in enumerate(file_sizes))
    return BucketPlan(b, "lake", tuple(f.uri for f in files), ("/log",), 10, 10 + changes, lake_files=files)


def test_a_few_changes_in_small_files_stay_on_one_thread():
    assert not threaded([bucket(b, 3, 2000) for b in range(4)])


def test_many_changes_get_threads():
    assert threaded([bucket(0, 6000, 2000), bucket(1, 4000, 2000)])


def test_a_few_changes_into_big_files_get_threads():
    """1,000 changes spread over 8 buckets of 17 files of 1 MiB: each a rewrite of tens of ms."""
    plans = [bucket(b, 125, *[MIB] * 17) for b in range(8)]
    assert threaded(plans)
    assert not threaded([bucket(0, 125, 4 * MIB), bucket(1, 125, 3 * MIB)])
