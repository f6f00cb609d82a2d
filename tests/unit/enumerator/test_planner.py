"""RoundPlanner: every per-bucket rule, read limits, fairness, determinism, re-created tables."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tiering.enumerator.planner import (
    LAKE_AHEAD_OF_LOG,
    SNAPSHOT_BEHIND_LOG_START,
    SNAPSHOT_UNAVAILABLE,
    WAIT_FOR_SNAPSHOT,
    RoundPlanner,
    SkippedBucket,
    TableInput,
)
from tiering.enumerator.positions import BucketPosition, LakePosition
from tiering.enumerator.splits import LogSplit, SnapshotSplit
from tiering.errors import DataLossError
from tiering.kvstore.contract import BucketLog, SnapshotRef, StoreColumn, StoreTable

pytestmark = pytest.mark.unit


def info(name: str = "orders", table_id: int = 3, num_buckets: int = 1) -> StoreTable:
    columns = (StoreColumn("id", "bigint", pa.int64(), nullable=False), StoreColumn("v", "string", pa.string()))
    return StoreTable(name, table_id, columns, ("id",), num_buckets)


def snap(
    bucket: int, snapshot_id: int, log_offset: int, rows: int | None = 10, size: int | None = 1000, table_id: int = 3
) -> SnapshotRef:
    return SnapshotRef(table_id, bucket, snapshot_id, log_offset, row_count=rows, size_bytes=size)


def logs(*ranges: tuple[int, int]) -> list[BucketLog]:
    return [BucketLog(b, s, e) for b, (s, e) in enumerate(ranges)]


def table(
    name: str = "orders",
    table_id: int = 3,
    ranges: tuple[tuple[int, int], ...] = ((0, 100),),
    snapshots: tuple[SnapshotRef, ...] = (),
    lake: LakePosition | None = None,
) -> TableInput:
    return TableInput(info(name, table_id, len(ranges)), list(snapshots), logs(*ranges), lake)


def plan(*tables: TableInput, round: int = 1, **kw):
    return RoundPlanner(**kw).plan(round, list(tables))


# -- per-bucket rules ---------------------------------------------------------------------


def test_never_tiered_with_snapshot_bootstraps_then_reads_log_from_the_snapshot():
    p = plan(table(ranges=((40, 100),), snapshots=(snap(0, 5, 60),)))
    assert p.splits == (SnapshotSplit("orders", 0, 3, 5, 60), LogSplit("orders", 0, 3, 60, 100))
    t = p.table("orders")
    assert (t.table_id, t.positions, t.lake, t.replace_table) == (3, {0: (100, 5)}, {}, False)


def test_never_tiered_snapshot_at_log_end_gives_no_log_split():
    p = plan(table(ranges=((0, 100),), snapshots=(snap(0, 5, 100),)))
    assert p.splits == (SnapshotSplit("orders", 0, 3, 5, 100),)
    assert p.table("orders").positions == {0: BucketPosition(100, 5)}


def test_snapshot_ahead_of_flushed_log_positions_at_the_snapshot():
    p = plan(table(ranges=((0, 80),), snapshots=(snap(0, 5, 90),)))
    assert p.splits == (SnapshotSplit("orders", 0, 3, 5, 90),)
    assert p.table("orders").positions == {0: (90, 5)}


def test_latest_snapshot_of_a_bucket_wins():
    p = plan(table(ranges=((0, 100),), snapshots=(snap(0, 7, 70), snap(0, 5, 50))))
    assert p.splits[0] == SnapshotSplit("orders", 0, 3, 7, 70)


def test_never_tiered_no_snapshot_full_log_reads_from_zero():
    p = plan(table(ranges=((0, 100),)))
    assert p.splits == (LogSplit("orders", 0, 3, 0, 100),)
    assert p.table("orders").positions == {0: (100, None)}


def test_never_tiered_empty_log_is_nothing_to_do():
    p = plan(table(ranges=((0, 0),)))
    assert (p.splits, p.tables, p.skipped) == ((), (), ())


def test_never_tiered_no_snapshot_truncated_log_waits_for_a_snapshot():
    p = plan(table(ranges=((10, 100),)))
    assert p.splits == ()
    assert p.tables == ()
    assert p.skipped == (SkippedBucket("orders", 0, WAIT_FOR_SNAPSHOT),)


def test_snapshot_older_than_log_start_is_not_used():
    p = plan(table(ranges=((50, 100),), snapshots=(snap(0, 5, 40),)))
    assert p.splits == ()
    assert p.skipped == (SkippedBucket("orders", 0, SNAPSHOT_BEHIND_LOG_START),)


def test_tiered_bucket_continues_from_the_lake_offset_and_ignores_snapshots():
    p = plan(table(ranges=((20, 100),), snapshots=(snap(0, 9, 90),), lake=LakePosition(3, {0: 60})))
    assert p.splits == (LogSplit("orders", 0, 3, 60, 100),)
    t = p.table("orders")
    assert (t.positions, t.lake, t.replace_table) == ({0: (100, None)}, {0: 60}, False)


def test_tiered_bucket_at_log_start_is_not_truncation():
    p = plan(table(ranges=((60, 100),), lake=LakePosition(3, {0: 60})))
    assert p.splits == (LogSplit("orders", 0, 3, 60, 100),)


def test_caught_up_bucket_keeps_its_position_without_splits():
    p = plan(table(ranges=((0, 100), (0, 50)), lake=LakePosition(3, {0: 100, 1: 30})))
    assert p.splits == (LogSplit("orders", 1, 3, 30, 50),)
    assert p.table("orders").positions == {0: (100, None), 1: (50, None)}


def test_truncated_past_the_lake_rebootstraps_from_latest_snapshot():
    p = plan(table(ranges=((80, 120),), snapshots=(snap(0, 8, 90),), lake=LakePosition(3, {0: 50})))
    assert p.splits == (SnapshotSplit("orders", 0, 3, 8, 90), LogSplit("orders", 0, 3, 90, 120))
    t = p.table("orders")
    assert (t.positions, t.lake, t.replace_table) == ({0: (120, 8)}, {0: 50}, False)


def test_truncated_past_the_lake_without_snapshot_waits_and_keeps_the_lake_position():
    p = plan(table(ranges=((80, 120),), lake=LakePosition(3, {0: 50})))
    assert p.splits == ()
    assert p.skipped == (SkippedBucket("orders", 0, WAIT_FOR_SNAPSHOT),)
    assert p.table("orders").positions == {0: (50, None)}


def test_truncated_past_the_lake_with_fail_on_data_loss_names_everything():
    with pytest.raises(DataLossError) as err:
        plan(
            table(ranges=((0, 10), (80, 120)), snapshots=(snap(1, 8, 90),), lake=LakePosition(3, {0: 10, 1: 50})),
            fail_on_data_loss=True,
        )
    msg = str(err.value)
    assert "'orders'" in msg and "bucket 1" in msg and "offset 50" in msg and "starts at 80" in msg
    assert err.value.table == "orders"


def test_fail_on_data_loss_does_not_fire_for_never_tiered_buckets():
    p = plan(table(ranges=((80, 120),), snapshots=(snap(0, 8, 90),)), fail_on_data_loss=True)
    assert [s.kind for s in p.splits] == ["snapshot", "log"]


def test_lake_ahead_of_log_is_reported_not_planned():
    p = plan(table(ranges=((0, 40),), lake=LakePosition(3, {0: 50})))
    assert p.splits == ()
    assert p.skipped == (SkippedBucket("orders", 0, LAKE_AHEAD_OF_LOG),)
    assert p.table("orders").positions == {0: (50, None)}


def test_recreated_table_bootstraps_every_bucket_and_replaces_the_table():
    old_lake = LakePosition(2, {0: 500, 1: 500})  # the old incarnation reached 500
    p = plan(table(table_id=3, ranges=((0, 30), (10, 40)), snapshots=(snap(1, 1, 20),), lake=old_lake))
    assert p.splits == (
        LogSplit("orders", 0, 3, 0, 30),
        SnapshotSplit("orders", 1, 3, 1, 20),
        LogSplit("orders", 1, 3, 20, 40),
    )
    t = p.table("orders")
    assert (t.table_id, t.positions, t.lake, t.replace_table) == (3, {0: (30, None), 1: (40, 1)}, {}, True)
    assert all(s.table_id == 3 for s in p.splits)


def test_recreated_table_never_triggers_data_loss_from_the_old_id():
    p = plan(table(table_id=3, ranges=((0, 30),), lake=LakePosition(2, {0: 500})), fail_on_data_loss=True)
    assert p.splits == (LogSplit("orders", 0, 3, 0, 30),)


def test_recreated_table_with_nothing_to_plan_carries_no_old_positions():
    p = plan(table(table_id=3, ranges=((10, 30),), lake=LakePosition(2, {0: 500})))
    assert p.tables == ()
    assert p.skipped == (SkippedBucket("orders", 0, WAIT_FOR_SNAPSHOT),)


def test_partially_tiered_table_bootstraps_only_the_untiered_bucket():
    p = plan(
        table(ranges=((0, 50), (0, 50)), snapshots=(snap(0, 4, 40), snap(1, 4, 45)), lake=LakePosition(3, {0: 20}))
    )
    assert p.splits == (
        LogSplit("orders", 0, 3, 20, 50),
        SnapshotSplit("orders", 1, 3, 4, 45),
        LogSplit("orders", 1, 3, 45, 50),
    )
    assert p.table("orders").replace_table is False


# -- input validation ---------------------------------------------------------------------


def test_missing_log_range_names_table_and_bucket():
    t = TableInput(info(num_buckets=2), [], logs((0, 10)), None)
    with pytest.raises(ValueError, match=r"'orders': no log range for buckets \[1\]"):
        RoundPlanner().plan(0, [t])


def test_snapshot_for_unknown_bucket_is_rejected():
    t = TableInput(info(num_buckets=1), [snap(3, 1, 1)], logs((0, 10)), None)
    with pytest.raises(ValueError, match="'orders': snapshot for bucket 3"):
        RoundPlanner().plan(0, [t])


def test_a_snapshot_of_another_table_id_is_never_planned():
    """The table re-created between the store's log ends and its snapshots: the new id's snapshot
    is not this incarnation's, so the bucket waits (its next round sees the new id)."""
    p = plan(table(table_id=3, ranges=((40, 100),), snapshots=(snap(0, 1, 60, table_id=4),)))
    assert p.splits == ()
    assert p.skipped == (SkippedBucket("orders", 0, WAIT_FOR_SNAPSHOT),)


def test_duplicate_table_names_are_rejected():
    with pytest.raises(ValueError, match="duplicate table names"):
        plan(table(), table())


@pytest.mark.parametrize("kw", [{"max_splits": -1}, {"max_bytes": -5}, {"default_record_bytes": 0}])
def test_bad_limits_are_rejected(kw):
    with pytest.raises(ValueError, match=next(iter(kw))):
        RoundPlanner(**kw)


# -- read limits, fairness, determinism ---------------------------------------------------


def many_buckets() -> list[TableInput]:
    return [
        table("b_items", 7, ranges=((0, 10), (0, 10))),
        table("a_orders", 3, ranges=((0, 10), (0, 10)), snapshots=(snap(0, 1, 5), snap(1, 1, 5))),
    ]


def admitted(p) -> list[tuple[str, int]]:
    return sorted({(s.table, s.bucket) for s in p.splits})


def test_no_limits_admits_everything_in_stable_order():
    p = plan(*many_buckets(), round=0)
    assert [(s.table, s.bucket, s.kind) for s in p.splits] == [
        ("a_orders", 0, "snapshot"),
        ("a_orders", 0, "log"),
        ("a_orders", 1, "snapshot"),
        ("a_orders", 1, "log"),
        ("b_items", 0, "log"),
        ("b_items", 1, "log"),
    ]
    assert p.deferred == ()


def test_max_splits_admits_whole_buckets_only():
    p = plan(*many_buckets(), round=0, max_splits=3)
    assert admitted(p) == [("a_orders", 0)]  # the next bucket's 2 splits would make 4
    assert len(p.splits) == 2
    assert p.deferred == (("a_orders", 1), ("b_items", 0), ("b_items", 1))


def test_at_least_one_bucket_is_admitted_even_over_the_limits():
    p = plan(*many_buckets(), round=0, max_splits=1, max_bytes=1)
    assert admitted(p) == [("a_orders", 0)]
    assert [s.kind for s in p.splits] == ["snapshot", "log"]


def test_max_bytes_uses_snapshot_size_plus_log_estimate():
    # a_orders bucket: snapshot 1000 bytes / 10 rows -> 100 bytes per record; log [5, 10) -> 500.
    # b_items has no snapshot rows -> default_record_bytes (128) * 10 records = 1280.
    tables = many_buckets()
    assert admitted(plan(*tables, round=0, max_bytes=3000)) == [("a_orders", 0), ("a_orders", 1)]
    assert admitted(plan(*tables, round=0, max_bytes=2999)) == [("a_orders", 0)]
    assert admitted(plan(*tables, round=0, max_bytes=1500, default_record_bytes=10)) == [("a_orders", 0)]
    assert admitted(plan(*tables, round=2, max_bytes=2560)) == [("b_items", 0), ("b_items", 1)]
    assert admitted(plan(*tables, round=2, max_bytes=2559)) == [("b_items", 0)]


@pytest.mark.parametrize(
    "snapshots, bucket_bytes",
    [
        # neither rows nor bytes (Fluss): 128 per record; a snapshot counts as its log offset's 5 changes
        ((snap(0, 1, 5, rows=None, size=None), snap(1, 1, 5, rows=None, size=None)), (5 * 128 + 5 * 128,) * 2),
        # rows but no bytes: no row size known (128), the snapshot counts as its 2 rows
        ((snap(0, 1, 5, rows=2, size=None), snap(1, 1, 5, rows=2, size=None)), (2 * 128 + 5 * 128,) * 2),
        # one sized snapshot gives the table's row size (1000 / 10) to the other's log offset
        ((snap(0, 1, 5), snap(1, 1, 5, rows=None, size=None)), (1000 + 5 * 100, 5 * 100 + 5 * 100)),
    ],
)
def test_max_bytes_estimates_a_snapshot_the_store_gives_no_size_of(snapshots, bucket_bytes):
    t = table("a_orders", 3, ranges=((0, 10), (0, 10)), snapshots=snapshots)
    total = sum(bucket_bytes)
    assert admitted(plan(t, round=0, max_bytes=total)) == [("a_orders", 0), ("a_orders", 1)]
    assert admitted(plan(t, round=0, max_bytes=total - 1)) == [("a_orders", 0)]
    assert admitted(plan(t, round=1, max_bytes=bucket_bytes[1])) == [("a_orders", 1)]


def test_rotation_by_round_admits_every_bucket_within_n_rounds():
    tables = many_buckets()
    seen = set()
    for r in range(4):
        p = plan(*tables, round=r, max_splits=1)
        assert len(admitted(p)) == 1
        seen |= set(admitted(p))
    assert seen == {("a_orders", 0), ("a_orders", 1), ("b_items", 0), ("b_items", 1)}
    assert admitted(plan(*tables, round=5, max_splits=1)) == [("a_orders", 1)]  # 5 % 4 == 1


def test_deferred_buckets_keep_their_lake_position():
    t = table(ranges=((0, 10), (0, 10)), lake=LakePosition(3, {0: 4, 1: 6}))
    p = plan(t, round=0, max_splits=1)
    assert p.splits == (LogSplit("orders", 0, 3, 4, 10),)
    assert p.table("orders").positions == {0: (10, None), 1: (6, None)}
    assert p.deferred == (("orders", 1),)


def test_plan_is_deterministic_for_equal_input_in_any_table_order():
    tables = many_buckets()
    a = plan(*tables, round=3, max_splits=4)
    b = plan(*reversed(tables), round=3, max_splits=4)
    assert a == b
    assert a.splits == tuple(sorted(a.splits, key=lambda s: (s.table, s.bucket, s.kind != "snapshot")))


# -- lease helpers ------------------------------------------------------------------------


def test_snapshot_refs_lists_every_snapshot_split():
    p = plan(*many_buckets(), round=0)
    assert p.snapshot_refs() == [
        SnapshotRef(3, 0, 1, 5),
        SnapshotRef(3, 1, 1, 5),
    ]


def test_without_buckets_drops_the_unavailable_bucket_and_its_position():
    p = plan(*many_buckets(), round=0)
    q = p.without_buckets([SnapshotRef(3, 1, 1, 5)])
    assert admitted(q) == [("a_orders", 0), ("b_items", 0), ("b_items", 1)]
    assert q.table("a_orders").positions == {0: (10, 1)}
    assert SkippedBucket("a_orders", 1, SNAPSHOT_UNAVAILABLE) in q.skipped
    assert q.snapshot_refs() == [SnapshotRef(3, 0, 1, 5)]


def test_without_buckets_reverts_a_rebootstrap_to_the_lake_position():
    p = plan(table(ranges=((80, 120),), snapshots=(snap(0, 8, 90),), lake=LakePosition(3, {0: 50})))
    q = p.without_buckets([SnapshotRef(3, 0, 8, 90)])
    assert q.splits == ()
    assert q.table("orders").positions == {0: (50, None)}


def test_without_buckets_removes_a_table_left_with_no_position():
    p = plan(table(table_id=3, ranges=((10, 30),), snapshots=(snap(0, 2, 20),), lake=LakePosition(2, {0: 9})))
    q = p.without_buckets(p.snapshot_refs())
    assert (q.splits, q.tables) == ((), ())


def test_without_buckets_ignores_refs_of_other_snapshots():
    p = plan(*many_buckets(), round=0)
    assert p.without_buckets([SnapshotRef(3, 1, 99, 0)]) is p
    assert p.without_buckets([SnapshotRef(4, 1, 1, 0)]) is p


def test_lake_position_copies_and_validates():
    src = {0: 5}
    pos = LakePosition(3, src)
    src[0] = 99
    assert pos.buckets == {0: 5}
    assert LakePosition.from_wire(3, {"0": 5, "2": 7}) == LakePosition(3, {0: 5, 2: 7})
    with pytest.raises(ValueError, match="bucket key 'x'"):
        LakePosition.from_wire(3, {"x": 5})
    with pytest.raises(ValueError, match="bucket 0 has bad offset -1"):
        LakePosition(3, {0: -1})


def test_rounds_under_limits_cover_every_offset_exactly_once():
    """Commit each round's positions to the 'lake' and re-plan: the log ranges handed out per
    bucket are contiguous from the bootstrap point to the log end, with no gap or overlap."""
    inputs = [
        table("a", 1, ranges=((0, 30), (0, 7), (0, 0))),
        table("b", 2, ranges=((5, 50), (0, 12)), snapshots=(snap(0, 3, 20, table_id=2),)),
    ]
    lake: dict[str, LakePosition] = {}
    covered: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for r in range(20):
        p = plan(
            *[TableInput(t.info, t.snapshots, t.logs, lake.get(t.info.name)) for t in inputs], round=r, max_splits=2
        )
        for s in p.splits:
            rng = (0, s.log_offset) if isinstance(s, SnapshotSplit) else (s.start_offset, s.end_offset)
            covered.setdefault((s.table, s.bucket), []).append(rng)
        for t in p.tables:
            lake[t.table] = LakePosition(t.table_id, {b: pos.log for b, pos in t.positions.items()})
    assert {k: v.buckets for k, v in lake.items()} == {"a": {0: 30, 1: 7}, "b": {0: 50, 1: 12}}
    for ranges in covered.values():
        assert all(prev[1] == nxt[0] for prev, nxt in zip(ranges, ranges[1:], strict=False))
    assert covered[("b", 0)][0] == (0, 20)  # bootstrapped from the snapshot, then the log from 20
