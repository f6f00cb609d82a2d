"""What `tiering group` lists from ZooKeeper's view of a group: each member node with the tables
it owns, and the tables no live member owns, with their last owner (docs/DESIGN.md §7)."""

from __future__ import annotations

import pytest

from tiering.coord.group import GroupView, MemberRecord
from tiering.coord.table_epochs import TableHolder

pytestmark = pytest.mark.unit

SELECTION = {"include": ["*"], "exclude": []}


def test_members_oldest_first_with_their_tables_then_the_tables_no_live_member_owns():
    view = GroupView(
        "g",
        records=[
            MemberRecord("b", SELECTION, "host-b", 22, since_ms=2_000),
            MemberRecord("a", SELECTION, None, None, since_ms=1_000),
        ],
        tables=["t1", "t2", "t3", "t4"],
        owners={
            "t1": TableHolder("t1", "a", 3),
            "t2": TableHolder("t2", "b", 1),
            "t3": TableHolder("t3", "dead", 2),
        },
    )

    assert view.listing() == {
        "group": "g",
        "members": [
            {"job": "a", "host": None, "pid": None, "since_ms": 1_000, "tables": {"t1": 3}},
            {"job": "b", "host": "host-b", "pid": 22, "since_ms": 2_000, "tables": {"t2": 1}},
        ],
        "unassigned": {"t3": "dead", "t4": None},
    }
    assert view.as_dict() == {
        "group": "g",
        "members": ["a", "b"],
        "owners": {
            "t1": {"job": "a", "table_epoch": 3},
            "t2": {"job": "b", "table_epoch": 1},
            "t3": {"job": "dead", "table_epoch": 2},
        },
    }
