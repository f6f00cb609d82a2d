"""The Spark source's pure parts: option validation, partitions from offsets, availableNow caps."""

from __future__ import annotations

import json
import pickle

import pytest

from tiering.enumerator.positions import BucketPosition
from tiering.enumerator.splits import LogSplit, SnapshotSplit
from tiering.kvstore.models import BucketLog
from tiering.source import KvTieringStreamReader, SourceOptions
from tiering.state.offset import TableOffset, TieringOffset

pytestmark = pytest.mark.unit

BASE = {"kvstore.url": "http://127.0.0.1:1", "job": "j", "checkpoint": "/tmp/c", "lake.root": "/tmp/l", "epoch": "3"}


def test_options_parse_with_defaults():
    o = SourceOptions.parse(BASE)
    assert (o.epoch, o.max_splits, o.max_bytes, o.fail_on_data_loss) == (3, 0, 0, False)
    assert o.tables.selects("orders")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("epoch", "-1", "option 'epoch': expected an integer >= 0, got -1"),
        ("max_splits_per_trigger", "many", "option 'max_splits_per_trigger': expected an integer"),
        ("fail_on_data_loss", "perhaps", "option 'fail_on_data_loss': expected true or false"),
        ("tables.include", "orders", "option 'tables.include': expected a JSON list of glob patterns"),
        ("max_split_per_trigger", "1", "unknown options ['max_split_per_trigger']"),
    ],
)
def test_bad_options_name_the_option(key, value, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        SourceOptions.parse({**BASE, key: value})


def test_missing_required_options_are_listed():
    with pytest.raises(ValueError, match=r"required options missing: \['kvstore.url', 'epoch'\]"):
        SourceOptions.parse({k: v for k, v in BASE.items() if k not in ("kvstore.url", "epoch")})


def test_partitions_depend_only_on_the_end_offset_one_per_table():
    splits = (
        SnapshotSplit("b", 0, 2, 5, 10),
        LogSplit("b", 0, 2, 10, 20),
        LogSplit("a", 1, 1, 0, 7),
    )
    end = TieringOffset("lease-1", 3, 9, {"a": TableOffset(1, {1: BucketPosition(7, None)})}, splits).to_dict()
    reader = KvTieringStreamReader(SourceOptions.parse(BASE))
    parts = reader.partitions({"anything": 1}, json.loads(json.dumps(end)))
    assert [p.rows for p in parts] == [
        (("a", 1, 1, "log", None, 0, 7, 9),),
        (("b", 2, 0, "snapshot", 5, None, 10, 9), ("b", 2, 0, "log", None, 10, 20, 9)),
    ]
    assert list(reader.read(parts[1])) == list(parts[1].rows)


def test_the_reader_pickles_without_its_clients():
    reader = KvTieringStreamReader(SourceOptions.parse(BASE))
    reader._targets = {"a": {0: 1}}
    copy = pickle.loads(pickle.dumps(reader))
    assert copy.options == reader.options and copy._client is None and copy._targets is None


def test_available_now_caps_log_ends_at_the_targets():
    reader = KvTieringStreamReader(SourceOptions.parse(BASE))
    reader._targets = {"a": {0: 50, 1: 5}}
    logs = [BucketLog(bucket=0, log_start_offset=0, log_end_offset=80), BucketLog(bucket=1, log_start_offset=10, log_end_offset=30)]
    assert [(b.log_start_offset, b.log_end_offset) for b in reader._capped("a", logs)] == [(0, 50), (10, 10)]
