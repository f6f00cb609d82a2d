"""Telling another writer's change of data from commits that change none, on real delta-rs tables
in a temporary directory (no Spark): which commits are looked at, and how often."""

from __future__ import annotations

from unittest import mock

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import CommitProperties

from tiering.delta_log import lake as lake_module
from tiering.delta_log.commits import commit_metadata
from tiering.delta_log.foreign import ForeignCommit, is_data_change
from tiering.delta_log.lake import Lake, LakeTables
from tiering.enumerator.positions import LakePosition

pytestmark = pytest.mark.unit


def _rows(first: int, n: int = 3) -> pa.Table:
    return pa.table({"id": pa.array(range(first, first + n), pa.int64()), "__bucket": pa.array([0] * n, pa.int32())})


def _round(path: str, round_id: int, mode: str = "overwrite") -> None:
    """A commit as the job makes one: kvTiering metadata (its txn does not matter here)."""
    metadata = commit_metadata(
        job="j", position=LakePosition(1, {0: round_id}), epoch=1, round_id=round_id, lease_id="l", snapshots={}
    )
    write_deltalake(
        path,
        _rows(round_id),
        mode=mode,
        partition_by=["__bucket"],
        commit_properties=CommitProperties(custom_metadata=metadata),
    )


@pytest.fixture
def lake(tmp_path) -> Lake:
    return Lake.at(str(tmp_path))


@pytest.mark.parametrize(
    "actions, changes",
    [
        ([{"commitInfo": {}}, {"add": {"path": "a", "dataChange": True}}], True),
        ([{"remove": {"path": "a", "dataChange": True}}], True),
        ([{"remove": {"path": "a", "dataChange": False}}, {"add": {"path": "b", "dataChange": False}}], False),
        ([{"commitInfo": {"operation": "VACUUM END"}}], False),
        ([{"metaData": {"id": "x"}}], False),
    ],
    ids=["append", "delete", "optimize", "vacuum", "schema"],
)
def test_only_added_or_removed_files_that_change_data_count(actions, changes):
    assert is_data_change(actions) is changes


def test_the_first_data_change_after_the_last_round_commit_is_found(lake):
    path = lake.path("t")
    _round(path, 1)
    DeltaTable(path).optimize.z_order(["id"])
    write_deltalake(path, _rows(100), mode="append")
    DeltaTable(path).delete("id = 100")

    assert lake.load("t").foreign == ForeignCommit(2, "WRITE")


def test_a_round_commit_after_it_clears_nothing_but_what_came_before_it(lake):
    path = lake.path("t")
    _round(path, 1)
    write_deltalake(path, _rows(100), mode="append")
    tables = LakeTables(lake)
    assert tables.load("t").foreign == ForeignCommit(1, "WRITE")
    _round(path, 2)  # a resync's replacing commit
    assert tables.load("t").foreign is None
    write_deltalake(path, _rows(200), mode="append")
    assert tables.load("t").foreign == ForeignCommit(3, "WRITE")
    DeltaTable(path).optimize.z_order(["id"])
    assert tables.load("t").foreign == ForeignCommit(3, "WRITE"), "kept until a round commit replaces it"


def test_no_log_entry_is_read_while_the_newest_commit_is_a_round_commit(lake):
    path = lake.path("t")
    _round(path, 1)
    tables = LakeTables(lake)
    with mock.patch.object(lake_module, "first_foreign_change", wraps=lake_module.first_foreign_change) as check:
        tables.load("t")
        _round(path, 2)
        tables.load("t")
        tables.load("t")
        assert [len(c.args[2]) for c in check.call_args_list] == [0, 0], "no version after a round commit"
        DeltaTable(path).optimize.z_order(["id"])
        tables.load("t")
        assert check.call_args_list[-1].args[2] == range(2, 3), "one new version, looked at once"


def test_a_table_with_no_round_commit_is_not_looked_at(lake):
    path = lake.path("t")
    write_deltalake(path, _rows(100), partition_by=["__bucket"])
    tables = LakeTables(lake)
    assert tables.load("t").foreign is None, "made by hand where a table lands: its schema check decides"
    write_deltalake(path, _rows(200), mode="append")
    assert tables.load("t").foreign is None
    _round(path, 1, mode="append")
    write_deltalake(path, _rows(300), mode="append")
    assert tables.load("t").foreign == ForeignCommit(3, "WRITE")
