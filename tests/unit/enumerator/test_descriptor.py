"""Descriptor rows (what the source's batches hold, one per split) name the split exactly."""

from __future__ import annotations

import pytest

from tiering.enumerator.descriptor import DESCRIPTOR_SCHEMA, from_descriptor, to_descriptor
from tiering.enumerator.splits import LogSplit, SnapshotSplit

pytestmark = pytest.mark.unit

SPLITS_AND_ROWS = [
    (SnapshotSplit("t", 0, 7, snapshot_id=3, log_offset=100), ("t", 7, 0, "snapshot", 3, None, 100, 42)),
    (LogSplit("t", 0, 7, 100, 150), ("t", 7, 0, "log", None, 100, 150, 42)),
]


@pytest.mark.parametrize(("split", "row"), SPLITS_AND_ROWS)
def test_a_descriptor_has_every_field_of_its_split(split, row):
    assert to_descriptor(split, 42) == row
    assert len(row) == len(DESCRIPTOR_SCHEMA.split(","))


@pytest.mark.parametrize("split", [split for split, _ in SPLITS_AND_ROWS])
def test_a_descriptor_decodes_back_to_its_split_and_round(split):
    assert from_descriptor(to_descriptor(split, 42)) == (split, 42)


@pytest.mark.parametrize(
    "row",
    [
        ("t", 7, 0, "snapshot", 3, 90, 100, 42),
        ("t", 7, 0, "snapshot", None, None, 100, 42),
        ("t", 7, 0, "log", 3, 100, 150, 42),
        ("t", 7, 0, "log", None, None, 150, 42),
        ("t", 7, None, "log", None, 100, 150, 42),
        ("t", 7, 0, "bulk", None, 100, 150, 42),
        ("t", 7, 0, "log", None, 100, 150),
    ],
)
def test_a_row_that_names_no_split_is_refused(row):
    with pytest.raises(ValueError, match="descriptor row"):
        from_descriptor(row)


def test_a_row_that_breaks_a_split_invariant_is_refused():
    with pytest.raises(ValueError, match="empty or inverted log range"):
        from_descriptor(("t", 7, 0, "log", None, 150, 100, 42))
