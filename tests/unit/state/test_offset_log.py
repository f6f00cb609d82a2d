"""Reading a batch's end offset back from Spark's offsets log: the round's splits, or a clear error."""

from __future__ import annotations

import re

import pytest

from tiering.enumerator.positions import BucketPosition
from tiering.enumerator.splits import LogSplit
from tiering.errors import CheckpointError
from tiering.state.offset import TableOffset, TieringOffset
from tiering.state.offset_log import read_batch_offset

pytestmark = pytest.mark.unit

OFFSET = TieringOffset("lease-1", 3, 9, {"a": TableOffset(1, {1: BucketPosition(7, None)})}, (LogSplit("a", 1, 1, 0, 7),))


def log_entry(tmp_path, batch_id: int, text: str) -> None:
    (tmp_path / "offsets").mkdir(exist_ok=True)
    (tmp_path / "offsets" / str(batch_id)).write_text(text)


def test_the_source_offset_of_the_batch_is_read_back(tmp_path):
    log_entry(tmp_path, 4, 'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n' + OFFSET.to_json())

    assert read_batch_offset(f"file://{tmp_path}", 4) == OFFSET


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("v2\n{}\n{}", "expected 'v1'"),
        ('v1\n{}\n{"v": 1}', "the source offset does not decode"),
        ("v1\n{}", "got 2 lines"),
    ],
)
def test_an_entry_it_cannot_read_names_the_file(tmp_path, text, complaint):
    log_entry(tmp_path, 0, text)
    with pytest.raises(CheckpointError, match=re.escape(str(tmp_path / "offsets" / "0")) + ".*" + complaint):
        read_batch_offset(str(tmp_path), 0)


def test_a_missing_entry_names_the_batch(tmp_path):
    with pytest.raises(CheckpointError, match="of batch 5 is unreadable"):
        read_batch_offset(str(tmp_path), 5)
