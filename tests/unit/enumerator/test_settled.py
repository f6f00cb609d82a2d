"""Which tables the planner may skip: caught up with log ends that have not moved since."""

from __future__ import annotations

import pytest

from tiering.enumerator.positions import LakePosition
from tiering.enumerator.settled import SettledTables, caught_up, reported_position
from tiering.kvstore.contract import BucketLog, LakeProgress, TableLog

pytestmark = pytest.mark.unit


def logs(*ends: int, start: int = 0) -> dict[int, BucketLog]:
    return {b: BucketLog(b, min(start, end), end) for b, end in enumerate(ends)}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    "lake, expected",
    [
        (LakePosition(7, {0: 5, 1: 3}), True),
        (LakePosition(7, {0: 5, 1: 2}), False),  # bucket 1 behind
        (LakePosition(7, {0: 5}), False),  # bucket 1 never tiered
        (LakePosition(8, {0: 5, 1: 3}), False),  # another incarnation's offsets
        (None, False),
    ],
)
def test_caught_up_means_every_bucket_at_its_log_end_for_this_table_id(lake, expected):
    assert caught_up(7, logs(5, 3), lake) is expected


def test_a_caught_up_table_is_skipped_until_its_log_moves():
    settled = SettledTables(clock=Clock())
    assert settled.record("t", 7, logs(5, 3), LakePosition(7, {0: 5, 1: 3}))
    assert settled.unchanged("t", 7, logs(5, 3))
    assert not settled.unchanged("t", 7, logs(6, 3)), "a new record in bucket 0"
    assert not settled.unchanged("t", 7, logs(5, 3)), "forgotten once it moved: the lake must be read again"


def test_a_table_behind_is_not_settled_and_forgets_an_older_entry():
    settled = SettledTables(clock=Clock())
    settled.record("t", 7, logs(5, 3), LakePosition(7, {0: 5, 1: 3}))
    assert not settled.record("t", 7, logs(5, 3), LakePosition(7, {0: 4, 1: 3}))
    assert not settled.unchanged("t", 7, logs(5, 3)) and len(settled) == 0


def test_a_recreated_table_or_a_moved_log_start_is_not_the_same_table():
    settled = SettledTables(clock=Clock())
    settled.record("t", 7, logs(5, 3), LakePosition(7, {0: 5, 1: 3}))
    assert not settled.unchanged("t", 9, logs(5, 3))
    settled.record("t", 7, logs(5, 3), LakePosition(7, {0: 5, 1: 3}))
    assert not settled.unchanged("t", 7, logs(5, 3, start=2))


def test_a_settled_table_is_read_again_after_the_recheck_interval_spread_per_table():
    clock = Clock()
    settled = SettledTables(clock=clock, recheck_s=100)
    names = [f"t{i}" for i in range(200)]
    for name in names:
        settled.record(name, 1, logs(1), LakePosition(1, {0: 1}))
    clock.now = 99.9
    assert all(settled.unchanged(name, 1, logs(1)) for name in names), "trusted for the interval"
    clock.now = 150
    due = [name for name in names if not settled.unchanged(name, 1, logs(1))]
    assert 50 < len(due) < 150, "spread over a second interval, not all at once"
    clock.now = 200
    assert not any(settled.unchanged(name, 1, logs(1)) for name in names)


@pytest.mark.parametrize(
    "lake_job, expected",
    [
        ("orders-tiering", LakePosition(7, {0: 5, 1: 3})),
        (None, LakePosition(7, {0: 5, 1: 3})),  # an older client's report names no job
        ("other-job", None),  # another job's lake: says nothing of this one's
    ],
)
def test_a_lake_report_settles_only_the_job_that_made_it(lake_job, expected):
    found = TableLog(7, logs(5, 3), LakeProgress(7, epoch=0, lake_version=0, offsets={0: 5, 1: 3}, job=lake_job))
    assert reported_position(found, "orders-tiering") == expected
    settled = SettledTables(clock=Clock())
    assert settled.record("t", 7, logs(5, 3), reported_position(found, "orders-tiering")) is (expected is not None)


def test_no_report_is_no_position():
    assert reported_position(TableLog(7, logs(5)), "j") is None, "none yet, or a store that keeps none (Fluss)"
    empty = LakeProgress(7, epoch=0, lake_version=0, offsets={})
    assert reported_position(TableLog(7, logs(5), empty), "j") is None
