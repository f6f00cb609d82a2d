"""Reading a table's position back from its commits, whichever writer made them."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import CommitProperties

from tiering.delta_log.commits import commit_metadata, round_commit_at
from tiering.delta_log.lake import Lake
from tiering.delta_log.layout import txn_version
from tiering.enumerator.positions import LakePosition
from tiering.writers.round_writer import post_commit

pytestmark = pytest.mark.integration


def test_positions_are_read_back_from_delta_spark_user_metadata(tmp_path):
    """delta-spark can only set commitInfo.userMetadata (a string); delta-rs history() shows it
    as ``userMetadata``. Written here with delta-rs in exactly that shape."""
    lake = Lake.at(str(tmp_path))
    position = LakePosition(1, {0: 15, 2: 3})
    metadata = commit_metadata(job="j", position=position, epoch=2, round_id=7, lease_id="lease-1", snapshots={0: 4})
    write_deltalake(
        lake.path("orders"),
        pa.table({"id": [1]}),
        commit_properties=CommitProperties(custom_metadata={"userMetadata": json.dumps(metadata, sort_keys=True)}),
    )
    write_deltalake(  # another tool's free-text userMetadata on top is walked past
        lake.path("orders"),
        pa.table({"id": [2]}),
        mode="append",
        commit_properties=CommitProperties(custom_metadata={"userMetadata": "manual fix-up"}),
    )

    loaded = lake.load("orders")
    assert loaded.position() == position and loaded.version == 1
    info = loaded.info
    assert (info.epoch, info.round_id, info.lease_id, info.job, info.delta_version) == (2, 7, "lease-1", "j", 0)
    assert info.snapshots == {0: 4}
    assert lake.position("orders", 1) == position
    assert lake.position("orders", 2) is None, "another incarnation's offsets are not this table's"
    assert lake.position("users", 1) is None and lake.load("users") is None


def test_a_round_commit_is_read_back_from_its_own_log_entry_as_the_history_shows_it(tmp_path):
    """One GET of the version a commit started from plus one, instead of listing the log: the
    commit info must be the history's (metrics included), and anything but this job's round
    with this txn is not ours."""
    lake = Lake.at(str(tmp_path))
    path = lake.path("orders")
    metadata = commit_metadata(
        job="j", position=LakePosition(1, {0: 5}), epoch=2, round_id=7, lease_id="l", snapshots={}
    )
    write_deltalake(path, pa.table({"id": [1]}), commit_properties=CommitProperties(custom_metadata=metadata))
    write_deltalake(path, pa.table({"id": [2]}), mode="append")  # another writer on top
    txn = txn_version(2, 7)

    ours = round_commit_at(lake.store, path, 0, "j", txn)

    (history,) = [c for c in DeltaTable(path).history() if c["version"] == 0]
    assert ours == history
    assert ours["operationMetrics"]["num_added_files"] == 1
    assert round_commit_at(lake.store, path, 1, "j", txn) is None, "another writer's commit"
    assert round_commit_at(lake.store, path, 0, "other-job", txn) is None
    assert round_commit_at(lake.store, path, 0, "j", txn_version(2, 8)) is None, "another round"
    assert round_commit_at(lake.store, path, 2, "j", txn) is None, "not written"


@pytest.mark.parametrize(("commits", "cleans"), [(4, False), (5, True)])
def test_a_round_commit_cleans_the_log_only_where_it_makes_a_checkpoint(tmp_path, commits, cleans):
    """delta-rs would list the whole log after every commit to clean it; a round lets it do so
    at a checkpoint only, where the table's own setting decides (None)."""
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": [0]}), configuration={"delta.checkpointInterval": "5"})
    for i in range(1, commits):
        write_deltalake(path, pa.table({"id": [i]}), mode="append")

    hooks = post_commit(DeltaTable(path))  # the next commit is version `commits`

    assert hooks.create_checkpoint is True
    assert hooks.cleanup_expired_logs is (None if cleans else False)
