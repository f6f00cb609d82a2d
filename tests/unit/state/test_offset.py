"""TieringOffset: canonical JSON (Spark compares strings), round trips, v0 decode, bad input."""

from __future__ import annotations

import json

import pytest

from tiering.enumerator.planner import RoundPlanner, TableInput
from tiering.enumerator.positions import BucketPosition, LakePosition
from tiering.enumerator.splits import LogSplit, SnapshotSplit
from tiering.kvstore.models import BucketLog, Snapshot, TableInfo
from tiering.state.offset import TableOffset, TieringOffset

pytestmark = pytest.mark.unit

CANONICAL = (
    '{"v":1,"lease_id":"orders-tiering-abc","epoch":7,"round":42,'
    '"tables":{"items":{"table_id":9,"buckets":{"0":{"log":5,"snapshot":null}}},'
    '"orders":{"table_id":3,"buckets":{"0":{"log":1200,"snapshot":5},"2":{"log":7,"snapshot":null},'
    '"10":{"log":30,"snapshot":null}}}},'
    '"splits":[["orders",0,"snapshot",3,5,1100],["orders",0,"log",3,1100,1200],["orders",10,"log",3,20,30]]}'
)


def sample() -> TieringOffset:
    return TieringOffset(
        lease_id="orders-tiering-abc",
        epoch=7,
        round=42,
        tables={
            "orders": TableOffset(
                3, {10: BucketPosition(30, None), 0: BucketPosition(1200, 5), 2: BucketPosition(7, None)}
            ),
            "items": TableOffset(9, {0: BucketPosition(5, None)}),
        },
        splits=(
            LogSplit("orders", 10, 3, 20, 30),
            LogSplit("orders", 0, 3, 1100, 1200),
            SnapshotSplit("orders", 0, 3, 5, 1100),
        ),
    )


def test_to_json_is_canonical_fixed_key_order_numeric_buckets_no_whitespace():
    assert sample().to_json() == CANONICAL


def test_round_trip_is_equal_and_byte_identical():
    decoded = TieringOffset.from_json(CANONICAL)
    assert decoded.to_json() == CANONICAL
    assert decoded.tables["orders"].buckets[0] == BucketPosition(1200, 5)
    assert decoded.splits[0] == SnapshotSplit("orders", 0, 3, 5, 1100)
    assert TieringOffset.from_json(decoded.to_json()) == decoded


def test_any_input_key_order_encodes_to_the_same_string():
    data = json.loads(CANONICAL)
    shuffled = {k: data[k] for k in reversed(list(data))}
    shuffled["tables"] = {k: data["tables"][k] for k in reversed(list(data["tables"]))}
    text = json.dumps(shuffled, indent=2)
    assert text != CANONICAL
    assert TieringOffset.from_json(text).to_json() == CANONICAL


def test_initial_offset():
    o = TieringOffset.initial("job-x", 4)
    assert o.to_json() == '{"v":1,"lease_id":"job-x","epoch":4,"round":0,"tables":{},"splits":[]}'
    assert TieringOffset.from_json(o.to_json()) == o


def test_after_round_checkpoints_the_plan():
    info = TableInfo(
        name="orders", table_id=3, schema=[{"name": "id", "type": "bigint"}], primary_key=["id"], num_buckets=2
    )
    snap = Snapshot(bucket=1, snapshot_id=5, log_offset=40, files=["f"], row_count=1, size_bytes=1)
    logs = [
        BucketLog(bucket=0, log_start_offset=0, log_end_offset=60),
        BucketLog(bucket=1, log_start_offset=30, log_end_offset=50),
    ]
    plan = RoundPlanner().plan(8, [TableInput(info, [snap], logs, LakePosition(3, {0: 20}))])
    previous = TieringOffset("L", 1, 7, {"users": TableOffset(4, {0: BucketPosition(9, None)})})
    tables = {t.table: TableOffset(t.table_id, dict(t.positions)) for t in plan.tables}
    o = previous.next_round(plan.round, plan.splits, tables, lease_id="L", epoch=2)
    assert (o.round, o.epoch) == (8, 2)
    assert o.tables == {"orders": TableOffset(3, {0: (60, None), 1: (50, 5)})}, "the round's tables only"
    assert o.splits == plan.splits
    assert TieringOffset.from_json(o.to_json()) == o


def test_v0_offset_still_decodes():
    v0 = '{"epoch": 2, "round": 9, "tables": {"orders": {"table_id": 3, "buckets": {"0": {"log": 100, "snapshot": 4}}}}}'
    o = TieringOffset.from_json(v0)
    assert (o.version, o.lease_id, o.epoch, o.round, o.splits) == (0, None, 2, 9, ())
    assert o.tables == {"orders": TableOffset(3, {0: BucketPosition(100, 4)})}


def test_v0_needs_a_lease_id_before_it_is_written_as_v1():
    from dataclasses import replace

    o = TieringOffset.from_json('{"epoch": 2, "round": 9, "tables": {}}')
    with pytest.raises(ValueError, match="'lease_id' is required"):
        o.to_json()
    assert replace(o, lease_id="L").to_json() == '{"v":1,"lease_id":"L","epoch":2,"round":9,"tables":{},"splits":[]}'


def mutate(path: list, value) -> str:
    data = json.loads(CANONICAL)
    target = data
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return json.dumps(data)


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (["epoch"], KeyError, "'epoch' is missing"),
        (["epoch"], "7", "'epoch' must be a non-negative integer"),
        (["round"], -1, "'round' must be a non-negative integer"),
        (["round"], True, "'round' must be a non-negative integer"),
        (["lease_id"], "", "'lease_id' must be a non-empty string"),
        (["lease_id"], KeyError, "'lease_id' is missing"),
        (["splits"], KeyError, "'splits' is missing"),
        (["splits"], {}, "'splits' must be a list"),
        (["v"], 2, "'v': version 2 is newer"),
        (["tables"], [], "'tables' must be an object"),
        (["tables", "orders", "table_id"], KeyError, "'tables.orders.table_id' is missing"),
        (["tables", "orders", "buckets", "0", "log"], KeyError, "'tables.orders.buckets.0.log' is missing"),
        (["tables", "orders", "buckets", "0", "snapshot"], "x", "'tables.orders.buckets.0.snapshot' must be"),
        (["tables", "orders", "buckets", "x"], {"log": 1, "snapshot": None}, "'tables.orders.buckets.x': bucket key"),
        (["tables", "orders", "extra"], 1, "'tables.orders' has unknown fields \\['extra'\\]"),
        (["splits", 0], ["orders", 0, "snapshot", 3, 5], "'splits\\[0\\]' must be a list of 6 items"),
        (["splits", 1, 2], "merge", "'splits\\[1\\]\\[2\\]' \\(kind\\) must be"),
        (["splits", 1, 0], "", "'splits\\[1\\]\\[0\\]' \\(table\\)"),
        (["splits", 1, 5], 1000, "'splits\\[1\\]': empty or inverted log range"),
        (["splits", 2, 4], None, "'splits\\[2\\]\\[4\\]' must be a non-negative integer"),
        (["extra"], 1, "unknown fields \\['extra'\\]"),
    ],
)
def test_malformed_offset_names_the_field(path, value, message):
    with pytest.raises(ValueError, match=message):
        TieringOffset.from_json(mutate(path, value))


def test_v0_rejects_v1_only_fields():
    with pytest.raises(ValueError, match=r"v0 has unknown fields \['lease_id'\]"):
        TieringOffset.from_json('{"lease_id": "x", "epoch": 1, "round": 1, "tables": {}}')


@pytest.mark.parametrize("text", ["", "{", "[1]", "null"])
def test_not_an_offset_at_all(text):
    with pytest.raises(ValueError, match="offset"):
        TieringOffset.from_json(text)
