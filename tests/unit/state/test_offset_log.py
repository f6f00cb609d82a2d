"""Reading a batch's end offset back from Spark's offsets log: the round's splits, or a clear error."""

from __future__ import annotations

import re

import pytest

from tiering.enumerator.splits import LogSplit
from tiering.errors import CheckpointError, OffsetLogFormatError
from tiering.state.offset import TieringOffset
from tiering.state.offset_log import newest_batch, newest_offset, read_batch_offset, replayed_offset

pytestmark = pytest.mark.unit

OFFSET = TieringOffset("lease-1", 3, 9, (LogSplit("a", 1, 1, 0, 7),))


def log_entry(tmp_path, batch_id: int, text: str) -> None:
    (tmp_path / "offsets").mkdir(exist_ok=True)
    (tmp_path / "offsets" / str(batch_id)).write_text(text)


def test_the_source_offset_of_the_batch_is_read_back(tmp_path):
    log_entry(tmp_path, 4, 'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n' + OFFSET.to_json())

    assert read_batch_offset(f"file://{tmp_path}", 4) == OFFSET


@pytest.mark.parametrize("version", ["v2", "v99", '{"batchWatermarkMs":0}'])
def test_an_entry_of_another_version_is_a_format_error_naming_the_file_and_the_version(tmp_path, version):
    log_entry(tmp_path, 0, f"{version}\n{{}}\n" + OFFSET.to_json())
    with pytest.raises(OffsetLogFormatError) as raised:
        read_batch_offset(str(tmp_path), 0)

    assert raised.value.path == str(tmp_path / "offsets" / "0")
    assert raised.value.version == version
    assert str(tmp_path / "offsets" / "0") in str(raised.value) and repr(version) in str(raised.value)


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ('v1\n{}\n{"v": 1}', "the source offset does not decode"),
        ("v1\n{}", "got 2 lines"),
        ("v1\n{}\n{}\n{}", "got 4 lines"),
        ("v1\n[]\n{}", "a JSON object of batch metadata"),
        ("", "is empty"),
    ],
)
def test_an_entry_of_the_known_version_it_cannot_read_is_corrupt_and_names_the_file(tmp_path, text, complaint):
    log_entry(tmp_path, 0, text)
    with pytest.raises(CheckpointError, match=re.escape(str(tmp_path / "offsets" / "0")) + ".*" + complaint) as raised:
        read_batch_offset(str(tmp_path), 0)
    assert not isinstance(raised.value, OffsetLogFormatError), "corruption is not a format change"


def test_a_missing_entry_names_the_batch(tmp_path):
    with pytest.raises(CheckpointError, match="of batch 5 is unreadable"):
        read_batch_offset(str(tmp_path), 5)


def test_the_replayed_round_is_the_newest_logged_batch_spark_has_not_committed(tmp_path):
    """What a new term keeps holds for: the batch Spark runs again on restart, and only that one."""
    entry = 'v1\n{"batchWatermarkMs":0}\n'
    assert replayed_offset(str(tmp_path)) is None, "no log yet"
    log_entry(tmp_path, 0, entry + TieringOffset("lease-1", 3, 1, ()).to_json())
    log_entry(tmp_path, 1, entry + OFFSET.to_json())
    (tmp_path / "commits").mkdir()
    (tmp_path / "commits" / "0").write_text("v1\n{}\n")

    assert newest_batch(str(tmp_path)) == 1 and newest_batch(str(tmp_path), "commits") == 0
    assert replayed_offset(str(tmp_path)) == OFFSET
    (tmp_path / "commits" / "1").write_text("v1\n{}\n")
    assert replayed_offset(str(tmp_path)) is None, "every logged batch ran"


def test_the_newest_logged_offset_is_the_next_batchs_start_whatever_ran(tmp_path):
    """Spark 4.0 and 4.1 give the source no start: it is the newest batch's logged end offset,
    committed or not (the source plans from the initial offset while there is none)."""
    entry = 'v1\n{"batchWatermarkMs":0}\n'
    assert newest_offset(str(tmp_path)) is None, "no log yet"
    log_entry(tmp_path, 0, entry + TieringOffset("lease-1", 3, 1, ()).to_json())
    log_entry(tmp_path, 1, entry + OFFSET.to_json())
    (tmp_path / "offsets" / ".1.crc").write_text("")  # Hadoop's checksum file is no batch
    (tmp_path / "commits").mkdir()
    (tmp_path / "commits" / "1").write_text("v1\n{}\n")

    assert newest_offset(f"file://{tmp_path}") == OFFSET
