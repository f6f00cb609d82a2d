"""A batch's splits come from the offsets log when its format is known, else from the batch's rows."""

from __future__ import annotations

import logging

import pytest

from tiering.enumerator.descriptor import to_descriptor
from tiering.enumerator.splits import LogSplit, SnapshotSplit
from tiering.errors import CheckpointError, TieringError
from tiering.round.batch_splits import BatchSplits, batch_splits
from tiering.state.offset import TieringOffset

pytestmark = pytest.mark.unit

SPLITS = (SnapshotSplit("a", 0, 1, 3, 10), LogSplit("a", 0, 1, 10, 12), LogSplit("b", 1, 2, 0, 5))
OFFSET = TieringOffset("lease-1", 3, 9, SPLITS)


class Batch:
    """What the rows path needs of ``foreachBatch``'s DataFrame; counts its Spark jobs."""

    def __init__(self, rows: list[tuple]) -> None:
        self.rows = rows
        self.collected = 0

    def collect(self) -> list[tuple]:
        self.collected += 1
        return self.rows


def log_entry(tmp_path, version: str, offset: str = OFFSET.to_json()) -> None:
    (tmp_path / "offsets").mkdir(exist_ok=True)
    (tmp_path / "offsets" / "4").write_text(f'{version}\n{{"batchWatermarkMs":0}}\n{offset}')


def rows(round_id: int = 9) -> list[tuple]:
    return [to_descriptor(split, round_id) for split in reversed(SPLITS)]


def test_a_known_format_is_read_from_the_log_without_a_spark_job(tmp_path):
    log_entry(tmp_path, "v1")
    batch = Batch(rows())

    assert batch_splits(batch, 4, str(tmp_path)) == BatchSplits(9, SPLITS, "offsets log")
    assert batch.collected == 0


def test_an_unknown_format_is_read_from_the_rows_sorted_and_says_why(tmp_path, caplog):
    log_entry(tmp_path, "v99")
    caplog.set_level(logging.WARNING, logger="tiering.round.batch_splits")

    assert batch_splits(Batch(rows()), 4, str(tmp_path)) == BatchSplits(9, SPLITS, "batch rows")
    [record] = caplog.records
    assert str(tmp_path / "offsets" / "4") in record.getMessage() and "'v99'" in record.getMessage()


def test_a_known_format_that_does_not_decode_is_not_read_around(tmp_path):
    log_entry(tmp_path, "v1", '{"v": 1}')
    batch = Batch(rows())

    with pytest.raises(CheckpointError, match="does not decode"):
        batch_splits(batch, 4, str(tmp_path))
    assert batch.collected == 0


@pytest.mark.parametrize(("batch_rows", "found"), [([], "got \\[\\]"), (rows(9)[:1] + rows(10)[1:], "got \\[9, 10\\]")])
def test_rows_that_name_no_single_round_are_refused(tmp_path, batch_rows, found):
    log_entry(tmp_path, "v99")
    with pytest.raises(TieringError, match=f"batch 4: .*one round, {found}"):
        batch_splits(Batch(batch_rows), 4, str(tmp_path))
