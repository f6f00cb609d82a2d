"""LakeTables told of the process's own round commit: the next load takes it as the table's
newest tiering commit without reading the history; a commit on top of it is read as before."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import CommitProperties, write_deltalake

from tiering.conf.model import LakeConfig
from tiering.enumerator.positions import LakePosition
from tiering.errors import LakeReadError
from tiering.lakestate.commits import commit_metadata, round_commit_info
from tiering.lakestate.lake import Lake, LakeTables

pytestmark = pytest.mark.unit


def _round(path: str, round_id: int, offset: int) -> dict:
    metadata = commit_metadata(job="j", position=LakePosition(7, {0: offset}), epoch=2, round_id=round_id,
                               lease_id="L", snapshots={})
    write_deltalake(path, pa.table({"x": [round_id]}), mode="append",
                    commit_properties=CommitProperties(custom_metadata=metadata))
    return metadata


def _corrupt(path: str, version: int) -> None:
    """A history read of ``version`` now fails: proof that a load did not make one."""
    with open(f"{path}/_delta_log/{version:020d}.json", "w") as log:
        log.write("{not json")


@pytest.mark.parametrize("told", [True, False])
def test_a_landed_round_commit_is_not_read_back(tmp_path, told):
    tables = LakeTables(Lake.of(LakeConfig(root=str(tmp_path))))
    path = str(tmp_path / "t")
    _round(path, 1, 10)
    view = tables.load("t")
    metadata = _round(path, 2, 25)
    view.dt.update_incremental()  # as the committer's handle is after its commit
    if told:
        tables.landed("t", round_commit_info(metadata, 1, "t"))
    _corrupt(path, 1)

    if not told:
        with pytest.raises(LakeReadError):
            tables.load("t")
        return
    loaded = tables.load("t")
    assert (loaded.info.delta_version, loaded.info.round_id, loaded.position(7).buckets) == (1, 2, {0: 25})
    assert loaded.foreign is None and loaded.info.committed_ms is None


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
