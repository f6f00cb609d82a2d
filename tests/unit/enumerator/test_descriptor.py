"""Descriptor rows (what the source's batches hold, one per split) name the split exactly."""

from __future__ import annotations

import pytest

from tiering.enumerator.descriptor import DESCRIPTOR_SCHEMA, to_descriptor
from tiering.enumerator.splits import LogSplit, SnapshotSplit

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("split", "row"),
    [
        (SnapshotSplit("t", 0, 7, snapshot_id=3, log_offset=100), ("t", 7, 0, "snapshot", 3, None, 100, 42)),
        (LogSplit("t", 0, 7, 100, 150), ("t", 7, 0, "log", None, 100, 150, 42)),
    ],
)
def test_a_descriptor_has_every_field_of_its_split(split, row):
    assert to_descriptor(split, 42) == row
    assert len(row) == len(DESCRIPTOR_SCHEMA.split(","))
