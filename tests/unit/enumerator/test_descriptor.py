"""Descriptor rows (what the source emits per split) round-trip to their splits."""

from __future__ import annotations

import pytest

from tiering.enumerator.descriptor import from_descriptor, to_descriptor
from tiering.enumerator.splits import LogSplit, SnapshotSplit

pytestmark = pytest.mark.unit

SNAP = SnapshotSplit("t", 0, 7, snapshot_id=3, log_offset=100)
AFTER_SNAP = LogSplit("t", 0, 7, 100, 150)


@pytest.mark.parametrize("split", [SNAP, AFTER_SNAP])
def test_descriptor_round_trip(split):
    assert from_descriptor(to_descriptor(split, 42)) == (split, 42)
