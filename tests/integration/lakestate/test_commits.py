"""Reading a table's position back from its commits, whichever writer made them."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from deltalake.transaction import CommitProperties

from tiering.enumerator.positions import LakePosition
from tiering.lakestate.commits import commit_metadata
from tiering.lakestate.lake import Lake

pytestmark = pytest.mark.integration


def test_positions_are_read_back_from_delta_spark_user_metadata(tmp_path):
    """delta-spark can only set commitInfo.userMetadata (a string); delta-rs history() shows it
    as ``userMetadata``. Written here with delta-rs in exactly that shape."""
    lake = Lake.at(str(tmp_path))
    position = LakePosition(1, {0: 15, 2: 3})
    metadata = commit_metadata(job="j", position=position, epoch=2, round_id=7, lease_id="lease-1", snapshots={0: 4})
    write_deltalake(
        lake.path("orders"), pa.table({"id": [1]}),
        commit_properties=CommitProperties(custom_metadata={"userMetadata": json.dumps(metadata, sort_keys=True)}),
    )
    write_deltalake(  # another tool's free-text userMetadata on top is walked past
        lake.path("orders"), pa.table({"id": [2]}), mode="append",
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
