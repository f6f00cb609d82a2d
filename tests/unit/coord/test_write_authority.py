"""Who may write a table, under which epoch: a job alone and a group member answer the same questions."""

from __future__ import annotations

import pytest

from tiering.coord.write_authority import MemberAuthority, SoloAuthority
from tiering.epochs import JobEpoch, TableEpoch
from tiering.errors import FencedEpochError, StoreError, TableMovedError
from tiering.kvstore.contract import TableClaims

pytestmark = pytest.mark.unit


def member(tables: dict[str, int], now: dict[str, int] | None = None) -> MemberAuthority:
    owned = {t: TableEpoch(e) for t, e in tables.items()}
    return MemberAuthority(
        "g", "a", owned, lambda: owned if now is None else {t: TableEpoch(e) for t, e in now.items()}
    )


def test_a_job_alone_writes_every_table_under_its_job_epoch_and_claims_nothing():
    solo = SoloAuthority("a", JobEpoch(7))
    assert solo.may_write("orders") and solo.group is None and not solo.hands_over
    solo.check("orders")
    assert solo.commit_epoch("orders", newest_in_lake=9) == 7, "a newer term's commit is the writer's to refuse"
    assert solo.table_epoch("orders") is None and solo.claims({1: "orders"}) is None
    fenced = FencedEpochError("newer", table="orders")
    assert solo.fenced("orders", fenced) is None, "a fence ends the term"
    error = StoreError("blip")
    assert solo.moved_meanwhile("orders", error) is error


def test_a_member_writes_only_its_tables_each_under_its_table_epoch():
    owner = member({"orders": 3, "users": 5})
    assert owner.may_write("orders") and not owner.may_write("audit") and owner.hands_over
    with pytest.raises(TableMovedError, match="'audit' is no longer owned by job 'a' in group 'g'"):
        owner.check("audit")
    assert owner.commit_epoch("orders", newest_in_lake=3) == 3 and owner.commit_epoch("orders", None) == 3
    with pytest.raises(TableMovedError, match="holds table epoch 3, the lake has a commit of table epoch 4"):
        owner.commit_epoch("orders", newest_in_lake=4)
    assert owner.claims({1: "orders", 2: "audit", 3: "users"}) == TableClaims("g", "a", {1: 3, 3: 5})
    assert owner.claims({2: "audit"}) is None


def test_a_member_reads_a_fence_of_its_table_as_the_table_moving():
    owner = member({"orders": 3})
    moved = owner.fenced("orders", FencedEpochError("table epoch 4 committed", table="orders"))
    assert isinstance(moved, TableMovedError) and "moved to another member" in str(moved)
    assert owner.fenced("orders", FencedEpochError("newer term", table="users")) is None
    assert owner.fenced("orders", FencedEpochError("newer term")) is None


def test_a_member_tells_a_table_given_away_since_the_round_began_by_reading_its_file_again():
    error = StoreError("file gone")
    assert member({"orders": 3}).moved_meanwhile("orders", error) is error, "still its own"
    moved = member({"orders": 3}, now={"orders": 4}).moved_meanwhile("orders", error)
    assert isinstance(moved, TableMovedError) and "file gone (the table moved to another member meanwhile)" in str(
        moved
    )
    assert member({"orders": 3}, now={}).moved_meanwhile("orders", error) is not error
    assert member({}, now={"orders": 1}).moved_meanwhile("orders", error) is error, "never its own"
