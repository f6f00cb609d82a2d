"""The group ownership file the leader writes and the planning process reads."""

from __future__ import annotations

import pytest

from tiering.coord.ownership import OwnedTables
from tiering.errors import CoordinationError

pytestmark = pytest.mark.unit


def test_written_whole_read_back_and_refused_for_another_member(tmp_path):
    path = tmp_path / "group-ownership.json"
    assert OwnedTables.read(path, "g", "a") == OwnedTables("g", "a"), "nothing owned before the first write"
    OwnedTables("g", "a", {"orders": 3, "odd/name": 1}).write(path)
    read = OwnedTables.read(path, "g", "a")
    assert dict(read.tables) == {"orders": 3, "odd/name": 1} and read.epoch("orders") == 3 and read.epoch("x") is None
    assert [p.name for p in tmp_path.iterdir()] == [path.name], "no temporary file left"
    with pytest.raises(CoordinationError, match="job 'a'.*not job 'b'"):
        OwnedTables.read(path, "g", "b")
