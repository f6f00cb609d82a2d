"""LakeTables told of the process's own round commit: the next load takes it as the table's
newest tiering commit without reading the history; a commit on top of it is read as before."""

from __future__ import annotations

from unittest import mock

import pyarrow as pa
import pytest
from deltalake import CommitProperties, write_deltalake
from deltalake.exceptions import DeltaError
from deltalake.transaction import Transaction

from tiering.conf.model import LakeConfig
from tiering.delta_log import lake as lake_module
from tiering.delta_log.commits import commit_metadata, round_commit_info
from tiering.delta_log.lake import Lake, LakeTable, LakeTables
from tiering.delta_log.layout import app_id, txn_version
from tiering.enumerator.positions import LakePosition
from tiering.errors import LakeReadError

pytestmark = pytest.mark.unit


def _round(path: str, round_id: int, offset: int) -> dict:
    """A round commit as the writer makes it: its entry and its txn."""
    metadata = commit_metadata(
        job="j", position=LakePosition(7, {0: offset}), epoch=2, round_id=round_id, lease_id="L", snapshots={}
    )
    write_deltalake(
        path,
        pa.table({"x": [round_id]}),
        mode="append",
        commit_properties=CommitProperties(
            custom_metadata=metadata, app_transactions=[Transaction(app_id("j", "t"), txn_version(2, round_id))]
        ),
    )
    return metadata


def _second_round_landed(tmp_path, told: bool, updated: bool = True) -> tuple[LakeTables, str, LakeTable]:
    """Two rounds of table "t"; the process's handle brought up to the second when
    ``updated`` (else left at the first: the committer reads its commit back without it), and
    LakeTables ``told`` of it or not. Returns the handle."""
    tables = LakeTables(Lake.of(LakeConfig(root=str(tmp_path))))
    path = str(tmp_path / "t")
    _round(path, 1, 10)
    view = tables.load("t")
    metadata = _round(path, 2, 25)
    if updated:
        view.dt.update_incremental()
    if told:
        tables.landed("t", round_commit_info(metadata, 1, "t"))
    return tables, path, view


def _corrupt(path: str, version: int) -> None:
    """A history read of ``version`` now fails: proof that a load did not make one."""
    with open(f"{path}/_delta_log/{version:020d}.json", "w") as log:
        log.write("{not json")


@pytest.mark.parametrize("told", [True, False])
def test_a_landed_round_commit_is_not_read_back(tmp_path, told):
    tables, path, _ = _second_round_landed(tmp_path, told)
    _corrupt(path, 1)

    if not told:
        with pytest.raises(LakeReadError):
            tables.load("t")
        return
    loaded = tables.load("t")
    assert (loaded.info.delta_version, loaded.info.round_id, loaded.position(7).buckets) == (1, 2, {0: 25})
    assert loaded.foreign is None and loaded.info.committed_ms is None


def test_a_landed_commit_one_past_the_handle_is_not_read_back_from_the_history(tmp_path):
    tables, path, _ = _second_round_landed(tmp_path, told=True, updated=False)

    with mock.patch.object(lake_module, "newest_commit", side_effect=AssertionError("the history was read")):
        loaded = tables.load("t")

    assert (loaded.version, loaded.info.delta_version, loaded.info.round_id, loaded.position(7).buckets) == (
        1,
        1,
        2,
        {0: 25},
    )
    assert loaded.info.committed_ms is None, "the landed info, not the history's"
    assert loaded.transaction_version(app_id("j", "t")) == txn_version(2, 2)
    _round(path, 3, 40)  # and a round on top of it is read as ever
    assert tables.load("t").info.round_id == 3


def test_a_commit_on_top_of_the_landed_one_is_read_from_the_history(tmp_path):
    tables = LakeTables(Lake.of(LakeConfig(root=str(tmp_path))))
    path = str(tmp_path / "t")
    _round(path, 1, 10)
    view = tables.load("t")
    metadata = _round(path, 2, 25)
    _round(path, 3, 40)  # another round landed before the handle was brought up to date
    view.dt.update_incremental()
    tables.landed("t", round_commit_info(metadata, 1, "t"))  # not the newest version: ignored

    loaded = tables.load("t")
    assert (loaded.info.delta_version, loaded.info.round_id, loaded.position(7).buckets) == (2, 3, {0: 40})


@pytest.mark.parametrize("told", [True, False])
def test_the_landed_commits_txn_is_known_without_replaying_the_log(tmp_path, told):
    tables, path, view = _second_round_landed(tmp_path, told)
    loaded = tables.load("t") if told else view
    _corrupt(path, 0)  # a replay of the log now fails
    _corrupt(path, 1)

    if not told:
        with pytest.raises(DeltaError):
            loaded.transaction_version(app_id("j", "t"))
        return
    assert loaded.transaction_version(app_id("j", "t")) == txn_version(2, 2)


def test_a_txn_is_read_again_at_a_newer_version(tmp_path):
    tables = LakeTables(Lake.of(LakeConfig(root=str(tmp_path))))
    path = str(tmp_path / "t")
    _round(path, 1, 10)
    loaded = tables.load("t")
    assert loaded.transaction_version(app_id("j", "t")) == txn_version(2, 1)
    _round(path, 2, 25)  # another term's handle, say, committed on top

    assert tables.load("t").transaction_version(app_id("j", "t")) == txn_version(2, 2)
    assert tables.load("t").transaction_version(app_id("j", "other")) is None
