"""TieringOffset: canonical JSON (Spark compares strings), round trips, v1 and v0 decode, size, bad input."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from tiering.enumerator.planner import RoundPlanner, TableInput
from tiering.enumerator.positions import LakePosition
from tiering.enumerator.splits import LogSplit, SnapshotSplit
from tiering.kvstore.contract import BucketLog, SnapshotRef, StoreColumn, StoreTable
from tiering.source import checkpoint
from tiering.state.offset import LastOffset, TieringOffset

pytestmark = pytest.mark.unit

CANONICAL = (
    '{"v":2,"lease_id":"orders-tiering-abc","epoch":7,"round":42,'
    '"splits":{"items":{"id":9,"log":[[0,4,5]]},'
    '"orders":{"id":3,"snapshot":[[0,5,1100]],"log":[[0,1100,1200],[2,6,7],[10,20,30]]}}}'
)

#: The same round as a v1 entry wrote it: every split names its table and table id,
#: ``tables`` carries the round's tables' positions.
V1 = (
    '{"v":1,"lease_id":"orders-tiering-abc","epoch":7,"round":42,'
    '"tables":{"items":{"table_id":9,"buckets":{"0":{"log":5,"snapshot":null}}},'
    '"orders":{"table_id":3,"buckets":{"0":{"log":1200,"snapshot":5},"2":{"log":7,"snapshot":null},'
    '"10":{"log":30,"snapshot":null}}}},'
    '"splits":[["items",0,"log",9,4,5],["orders",0,"snapshot",3,5,1100],["orders",0,"log",3,1100,1200],'
    '["orders",2,"log",3,6,7],["orders",10,"log",3,20,30]]}'
)

SPLITS = (
    LogSplit("orders", 10, 3, 20, 30),
    LogSplit("orders", 0, 3, 1100, 1200),
    LogSplit("items", 0, 9, 4, 5),
    LogSplit("orders", 2, 3, 6, 7),
    SnapshotSplit("orders", 0, 3, 5, 1100),
)


def sample() -> TieringOffset:
    return TieringOffset(lease_id="orders-tiering-abc", epoch=7, round=42, splits=SPLITS)


def test_to_json_is_canonical_grouped_by_table_numeric_buckets_no_whitespace():
    assert sample().to_json() == CANONICAL


def test_splits_are_kept_in_canonical_order_whatever_order_they_come_in():
    expected = (SPLITS[4], SPLITS[1], SPLITS[3], SPLITS[0])
    assert sample().splits == (SPLITS[2], *expected)
    assert TieringOffset("orders-tiering-abc", 7, 42, tuple(reversed(SPLITS))) == sample()
    assert TieringOffset("orders-tiering-abc", 7, 42, tuple(reversed(SPLITS))).to_json() == CANONICAL


def test_round_trip_is_equal_and_byte_identical():
    decoded = TieringOffset.from_json(CANONICAL)
    assert decoded == sample()
    assert decoded.to_json() == CANONICAL
    assert decoded.splits[1] == SnapshotSplit("orders", 0, 3, 5, 1100)


def test_any_input_key_order_encodes_to_the_same_string():
    data = json.loads(CANONICAL)
    shuffled = {k: data[k] for k in reversed(list(data))}
    shuffled["splits"] = {k: dict(reversed(list(v.items()))) for k, v in reversed(list(data["splits"].items()))}
    text = json.dumps(shuffled, indent=2)
    assert text != CANONICAL
    assert TieringOffset.from_json(text).to_json() == CANONICAL


def test_initial_offset():
    o = TieringOffset.initial("job-x", 4)
    assert o.to_json() == '{"v":2,"lease_id":"job-x","epoch":4,"round":0,"splits":{}}'
    assert TieringOffset.from_json(o.to_json()) == o


def test_after_round_checkpoints_the_plan():
    info = StoreTable("orders", 3, (StoreColumn("id", "bigint", pa.int64(), nullable=False),), ("id",), 2)
    snap = SnapshotRef(3, 1, 5, 40, row_count=1, size_bytes=1)
    logs = [BucketLog(0, 0, 60), BucketLog(1, 30, 50)]
    plan = RoundPlanner().plan(8, [TableInput(info, [snap], logs, LakePosition(3, {0: 20}))])
    o = checkpoint(plan, lease_id="L", epoch=2)
    assert (o.round, o.epoch, o.splits) == (8, 2, plan.splits), "the round's splits only"
    assert TieringOffset.from_json(o.to_json()) == o


def test_v1_offset_still_decodes_to_the_same_splits():
    o = TieringOffset.from_json(V1)
    assert (o.version, o.lease_id, o.epoch, o.round) == (1, "orders-tiering-abc", 7, 42)
    assert o.splits == sample().splits
    assert o.to_json() == CANONICAL, "rewritten as v2"


def test_v0_offset_still_decodes():
    v0 = (
        '{"epoch": 2, "round": 9, "tables": {"orders": {"table_id": 3, "buckets": {"0": {"log": 100, "snapshot": 4}}}}}'
    )
    o = TieringOffset.from_json(v0)
    assert (o.version, o.lease_id, o.epoch, o.round, o.splits) == (0, None, 2, 9, ())


def test_v0_needs_a_lease_id_before_it_is_written():
    from dataclasses import replace

    o = TieringOffset.from_json('{"epoch": 2, "round": 9, "tables": {}}')
    with pytest.raises(ValueError, match="'lease_id' is required"):
        o.to_json()
    assert replace(o, lease_id="L").to_json() == '{"v":2,"lease_id":"L","epoch":2,"round":9,"splits":{}}'


def test_a_table_split_across_two_ids_is_refused():
    with pytest.raises(ValueError, match="table 'a' has splits for table ids 1 and 2"):
        TieringOffset("L", 1, 1, (LogSplit("a", 0, 1, 0, 5), LogSplit("a", 1, 2, 0, 5))).to_json()


def v1_entry(offset: TieringOffset, positions: dict[str, dict]) -> str:
    """``offset`` as the v1 encoder wrote it: one list per split naming its table and table id,
    and every table's positions after the round (all four buckets here)."""
    tables = {
        name: {"table_id": table_id, "buckets": {str(b): {"log": end, "snapshot": None} for b, end in ends.items()}}
        for name, (table_id, ends) in positions.items()
    }
    splits = [[s.table, s.bucket, "log", s.table_id, s.start_offset, s.end_offset] for s in offset.splits]
    return json.dumps(
        {
            "v": 1,
            "lease_id": offset.lease_id,
            "epoch": offset.epoch,
            "round": offset.round,
            "tables": tables,
            "splits": splits,
        },
        separators=(",", ":"),
    )


def test_a_changed_round_of_1000_tables_is_a_fraction_of_its_v1_entry():
    """The tables benchmark's changed round: 1,000 tables, a log split in each of 4 buckets
    (v1 wrote 302.7 KB of offset entry for it)."""
    tables = {f"t1000_{i:05d}": (20_000 + i, {b: 23 for b in range(4)}) for i in range(1000)}
    splits = tuple(LogSplit(name, b, table_id, 20, 23) for name, (table_id, _) in tables.items() for b in range(4))
    offset = TieringOffset("bench-tables-1000-lease-0123456789abcdef", 3, 17, splits)
    v1, v2 = v1_entry(offset, tables), offset.to_json()
    assert TieringOffset.from_json(v1).splits == TieringOffset.from_json(v2).splits == offset.splits
    assert len(v2) < 80_000 and len(v1) / len(v2) > 3.5, (len(v1), len(v2))


def mutate(path: list, value, text: str = CANONICAL) -> str:
    """``text`` with the field at ``path`` set to ``value`` (``KeyError``: removed)."""
    data = json.loads(text)
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
        (["splits"], [], "'splits' must be an object"),
        (["v"], 3, "'v': version 3 is newer"),
        (["tables"], {}, "v2 has unknown fields \\['tables'\\]"),
        (["splits", ""], {"id": 1, "log": [[0, 1, 2]]}, "'splits.': the table name must be non-empty"),
        (["splits", "orders", "id"], KeyError, "'splits.orders.id' is missing"),
        (["splits", "orders", "id"], -3, "'splits.orders.id' must be a non-negative integer"),
        (["splits", "orders", "extra"], 1, "'splits.orders' has unknown fields \\['extra'\\]"),
        (["splits", "items", "log"], KeyError, "'splits.items' has no 'snapshot' and no 'log' splits"),
        (["splits", "items", "log"], [], "'splits.items.log' must be a non-empty list"),
        (["splits", "items", "log"], None, "'splits.items.log' must be a non-empty list"),
        (["splits", "orders", "snapshot", 0], [0, 5], "'splits.orders.snapshot\\[0\\]' must be a list of 3 items"),
        (["splits", "orders", "log", 1, 2], 6, "'splits.orders.log\\[1\\]': empty or inverted log range"),
        (["splits", "orders", "log", 2, 0], "10", "'splits.orders.log\\[2\\]\\[0\\]' must be a non-negative integer"),
        (["extra"], 1, "unknown fields \\['extra'\\]"),
    ],
)
def test_malformed_offset_names_the_field(path, value, message):
    with pytest.raises(ValueError, match=message):
        TieringOffset.from_json(mutate(path, value))


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (["tables"], KeyError, "'tables' is missing"),
        (["tables"], [], "'tables' must be an object"),
        (["splits"], {}, "'splits' must be a list"),
        (["splits", 0], ["orders", 0, "snapshot", 3, 5], "'splits\\[0\\]' must be a list of 6 items"),
        (["splits", 2, 2], "merge", "'splits\\[2\\]\\[2\\]' \\(kind\\) must be"),
        (["splits", 2, 0], "", "'splits\\[2\\]\\[0\\]' \\(table\\)"),
        (["splits", 2, 5], 1000, "'splits\\[2\\]': empty or inverted log range"),
        (["splits", 1, 4], None, "'splits\\[1\\]\\[4\\]' must be a non-negative integer"),
    ],
)
def test_malformed_v1_offset_names_the_field(path, value, message):
    with pytest.raises(ValueError, match=message):
        TieringOffset.from_json(mutate(path, value, V1))


def test_v0_rejects_later_fields():
    with pytest.raises(ValueError, match=r"v0 has unknown fields \['lease_id'\]"):
        TieringOffset.from_json('{"lease_id": "x", "epoch": 1, "round": 1, "tables": {}}')


@pytest.mark.parametrize("text", ["", "{", "[1]", "null"])
def test_not_an_offset_at_all(text):
    with pytest.raises(ValueError, match="offset"):
        TieringOffset.from_json(text)


def test_the_offset_spark_hands_back_again_is_decoded_once():
    splits = (SnapshotSplit("b", 0, 2, 5, 10), LogSplit("a", 1, 1, 0, 7))
    last = LastOffset()
    first = last.decoded(TieringOffset("j-lease", 3, 9, splits).to_dict())
    again = last.decoded(json.loads(json.dumps(TieringOffset("j-lease", 3, 9, splits).to_dict())))  # as Spark parses it
    other = last.decoded(TieringOffset("j-lease", 3, 10, splits).to_dict())
    assert again is first and set(first.splits) == set(splits)
    assert other is not first and (other.round, set(other.splits)) == (10, set(splits))


def test_the_offset_returned_is_the_one_kept():
    returned = TieringOffset("j-lease", 3, 9, (LogSplit("a", 1, 1, 0, 7),))
    last = LastOffset()
    encoded = last.encoded(returned)
    assert encoded == returned.to_dict()
    assert last.decoded(json.loads(json.dumps(encoded))) is returned
