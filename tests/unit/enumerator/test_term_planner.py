"""The term's planning rules, through the planner's public methods: which tables a round reads and
plans, settled tables, an availableNow run's targets and stalls, the freshness schedule, a group
member's tables, and the epoch fence on the checkpoint's last offset."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tiering.conf.loader import load_config
from tiering.coord.write_authority import MemberAuthority, SoloAuthority
from tiering.enumerator.positions import LakePosition
from tiering.enumerator.term_planner import AVAILABLE_NOW_MAX_ATTEMPTS, TermPlanner, check_term
from tiering.epochs import JobEpoch, TableEpoch
from tiering.errors import FencedEpochError
from tiering.kvstore.contract import BucketLog, LakeProgress, StoreColumn, StoreTable, TableLog
from tiering.state.offset import TieringOffset

pytestmark = pytest.mark.unit

SOLO = SoloAuthority("j", JobEpoch(3))


def config(**settings):
    base = {
        "job.name": "j",
        "job.checkpoint": "/tmp/c",
        "kvstore.url": "http://127.0.0.1:1",
        "zookeeper.hosts": "127.0.0.1:1",
        "lake.root": "/tmp/l",
    }
    return load_config(None, {}, {**base, **settings})


def table(name: str, table_id: int = 1, buckets: int = 2) -> StoreTable:
    return StoreTable(name, table_id, (StoreColumn("id", "bigint", pa.int64(), nullable=False),), ("id",), buckets)


def log_of(table_id: int, *ends: int, reported: LakeProgress | None = None) -> TableLog:
    return TableLog(table_id, {b: BucketLog(b, 0, end) for b, end in enumerate(ends)}, reported)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def names(found) -> list[str]:
    return [t.name for t in found]


def test_a_caught_up_table_is_not_read_again_until_its_log_moves():
    planner = TermPlanner(config(), "j")
    tables = [table("a")]
    found = planner.to_read(tables, {"a": log_of(1, 5, 3)}, SOLO)
    assert names(found) == ["a"]
    assert not planner.wants(found[0], LakePosition(1, {0: 5, 1: 3}), planned_before=False), "nothing to tier"
    assert planner.to_read(tables, {"a": log_of(1, 5, 3)}, SOLO) == [], "settled with these very ends"
    moved = planner.to_read(tables, {"a": log_of(1, 6, 3)}, SOLO)
    assert names(moved) == ["a"] and planner.wants(moved[0], LakePosition(1, {0: 5, 1: 3}), planned_before=False)


def test_a_table_not_read_yet_is_settled_on_this_jobs_report_only():
    planner = TermPlanner(config(), "j")
    mine = LakeProgress(table_id=1, epoch=3, lake_version=4, offsets={0: 5, 1: 3}, job="j")
    other = LakeProgress(table_id=2, epoch=3, lake_version=4, offsets={0: 5, 1: 3}, job="k")
    ends = {"a": log_of(1, 5, 3, reported=mine), "b": log_of(2, 5, 3, reported=other)}
    assert names(planner.to_read([table("a", 1), table("b", 2)], ends, SOLO)) == ["b"]


def test_tables_listed_under_another_id_or_not_at_all_wait_for_the_next_round():
    planner = TermPlanner(config(), "j")
    ends = {"a": log_of(9, 5, 3)}  # re-created between the listing and the log ends
    assert planner.to_read([table("a", 1), table("b", 2)], ends, SOLO) == []


def test_only_the_selected_tables_and_in_a_group_the_owned_ones_are_read():
    planner = TermPlanner(config(**{"tables.include": ["o*"]}), "j")
    listed = [table("orders", 1), table("odd", 2), table("users", 3)]
    ends = {t.name: log_of(t.table_id, 5, 3) for t in listed}
    assert names(planner.to_read(listed, ends, SOLO)) == ["orders", "odd"]
    member = MemberAuthority("g", "j", {"odd": TableEpoch(4), "users": TableEpoch(2)}, dict)
    found = planner.to_read(listed, ends, member)
    assert names(found) == ["odd"] and found[0].identity == (2, 4), "a table's identity carries its table epoch"


def test_an_available_now_run_reads_its_targeted_tables_up_to_the_ends_fixed_at_its_start():
    planner = TermPlanner(config(**{"trigger.available_now": True}), "j")
    planner.fix_targets([table("a")], {"a": log_of(1, 50, 5)}, SOLO)
    later = TableLog(1, {0: BucketLog(0, 0, 80), 1: BucketLog(1, 10, 30)})
    found = planner.to_read([table("a"), table("b", 2)], {"a": later, "b": log_of(2, 7, 7)}, SOLO)
    assert names(found) == ["a"], "a table created after the run started waits for the next run"
    assert found[0].logs == {0: BucketLog(0, 0, 50), 1: BucketLog(1, 10, 10)}


def test_an_available_now_run_gives_up_on_a_table_whose_lake_never_moves():
    planner = TermPlanner(config(**{"trigger.available_now": True}), "j")
    planner.fix_targets([table("a")], {"a": log_of(1, 50, 5)}, SOLO)
    stuck = LakePosition(1, {0: 10, 1: 5})
    found = planner.to_read([table("a")], {"a": log_of(1, 50, 5)}, SOLO)[0]
    assert planner.wants(found, stuck, planned_before=False)
    wanted = [planner.wants(found, stuck, planned_before=True) for _ in range(AVAILABLE_NOW_MAX_ATTEMPTS + 1)]
    assert wanted == [True] * AVAILABLE_NOW_MAX_ATTEMPTS + [False]
    assert not planner.wants(found, LakePosition(1, {0: 11, 1: 5}), planned_before=True), "given up for the run"


def test_only_a_continuous_run_with_targets_of_its_own_plans_by_schedule():
    targeted = {"tables.freshness_targets": {"audit_*": 3600.0}}
    planner = TermPlanner(config(**targeted), "j")
    assert planner.schedule is not None and planner.schedule is planner.schedule, "one schedule per process"
    planner.fix_targets([], {}, SOLO)  # prepareForTriggerAvailableNow
    assert planner.schedule is None
    assert TermPlanner(config(**targeted, **{"trigger.available_now": True}), "j").schedule is None
    assert TermPlanner(config(), "j").schedule is None, "no target of its own: every changed table at every trigger"


def test_a_table_with_a_target_waits_for_it_once_its_lake_holds_what_was_planned():
    clock = Clock()
    planner = TermPlanner(config(**{"tables.freshness_targets": {"audit": 3600.0}}), "j", clock)
    tables, ends = [table("audit")], {"audit": log_of(1, 5, 3)}
    planner.begin()
    found = planner.to_read(tables, ends, SOLO)
    assert names(found) == ["audit"] and planner.wants(found[0], None, planned_before=False), "never tiered"
    plan = planner.plan(1, [found[0].input(None, ())], read_all=False)
    planner.planned(plan, found)
    clock.now = 5.0
    planner.begin()
    again = planner.to_read(tables, {"audit": log_of(1, 6, 3)}, SOLO)
    assert not planner.wants(again[0], LakePosition(1, {0: 5, 1: 3}), planned_before=True), "clean at 0 s: waits"
    clock.now = 10.0
    planner.begin()
    assert planner.to_read(tables, {"audit": log_of(1, 7, 3)}, SOLO) == [], "changed, its target not due: unread"


def test_snapshots_are_read_for_a_bootstrap_or_under_a_byte_limit():
    planner = TermPlanner(config(), "j")
    found = planner.to_read([table("a")], {"a": log_of(1, 5, 3)}, SOLO)[0]
    assert planner.needs_snapshots(found, None), "never tiered"
    assert not planner.needs_snapshots(found, LakePosition(1, {0: 2, 1: 3}))
    limited = TermPlanner(config(**{"limits.max_bytes_per_trigger": 1000}), "j")
    assert limited.needs_snapshots(found, LakePosition(1, {0: 2, 1: 3})), "a record's bytes are estimated"


def test_a_round_is_capped_by_the_limits_unless_spark_reads_everything():
    planner = TermPlanner(config(**{"limits.max_splits_per_trigger": 1}), "j")
    found = planner.to_read([table("a")], {"a": log_of(1, 5, 3)}, SOLO)[0]
    inputs = [found.input(LakePosition(1, {0: 0, 1: 0}), ())]
    assert len(planner.plan(1, inputs, read_all=False).splits) == 1
    assert len(planner.plan(1, inputs, read_all=True).splits) == 2


def test_an_offset_planned_by_a_newer_epoch_fences_this_term():
    with pytest.raises(FencedEpochError, match="planned by epoch 4, this term is epoch 3"):
        check_term(TieringOffset("j-lease", 4, 9), job="j", epoch=3, lease_id="j-lease")
    check_term(TieringOffset("old-lease", 3, 9), job="j", epoch=3, lease_id="j-lease")  # lapses on its own
