"""Trimming replayed rounds to what the lake lacks."""

from __future__ import annotations

import pytest

from tiering.delta_log.replay import missing_splits
from tiering.enumerator.positions import LakePosition
from tiering.enumerator.splits import LogSplit, SnapshotSplit

pytestmark = pytest.mark.unit

SNAP = SnapshotSplit("t", 0, 7, snapshot_id=3, log_offset=100)
AFTER_SNAP = LogSplit("t", 0, 7, 100, 150)
LOG_B1 = LogSplit("t", 1, 7, 40, 90)


def test_nothing_tiered_keeps_every_split():
    assert missing_splits([LOG_B1, SNAP, AFTER_SNAP], None) == [SNAP, AFTER_SNAP, LOG_B1]


def test_a_fully_committed_round_trims_to_nothing():
    lake = LakePosition(7, {0: 150, 1: 90})
    assert missing_splits([SNAP, AFTER_SNAP, LOG_B1], lake) == []


def test_a_partly_applied_log_split_starts_at_the_lake():
    lake = LakePosition(7, {1: 60})
    assert missing_splits([LOG_B1], lake) == [LogSplit("t", 1, 7, 60, 90)]


def test_a_snapshot_the_lake_is_past_is_dropped_and_its_log_trimmed():
    lake = LakePosition(7, {0: 120})
    assert missing_splits([SNAP, AFTER_SNAP], lake) == [LogSplit("t", 0, 7, 120, 150)]


def test_a_rebootstrap_after_truncation_keeps_snapshot_and_log():
    lake = LakePosition(7, {0: 20})  # lake behind the snapshot: the log was truncated past it
    assert missing_splits([SNAP, AFTER_SNAP], lake) == [SNAP, AFTER_SNAP]


def test_another_incarnation_of_the_table_counts_as_nothing_tiered():
    lake = LakePosition(6, {0: 500, 1: 500})
    assert missing_splits([SNAP, LOG_B1], lake) == [SNAP, LOG_B1]


def test_a_log_split_above_the_lake_is_a_gap_and_refused():
    lake = LakePosition(7, {1: 10})
    with pytest.raises(ValueError, match=r"bucket 1: round starts at offset 40 but the lake holds only up to 10"):
        missing_splits([LOG_B1], lake)
