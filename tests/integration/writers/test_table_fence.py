"""A new group owner's fence on a Delta table (tiering.writers.table_fence): a commit prepared on the
table before the fence fails instead of landing, and the fence only grows."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError

from tests.support.lake import delta_rows
from tiering.delta_log.commits import fence_epoch
from tiering.writers.table_fence import fence_table

pytestmark = pytest.mark.integration


def test_a_commit_prepared_before_the_fence_fails_and_the_fence_only_grows(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": [1]}))
    old_owner = DeltaTable(path)  # the old owner read the table: its next commit starts from here

    assert fence_table(DeltaTable(path), "t", writer="group:g", epoch=2)
    with pytest.raises(CommitFailedError, match="Metadata changed"):
        write_deltalake(old_owner, pa.table({"id": [2]}), mode="append")
    fenced = DeltaTable(path)
    assert fence_epoch(fenced, "group:g") == 2 and fenced.version() == 1
    assert delta_rows(fenced).column("id").to_pylist() == [1], "nothing of the old owner landed"

    assert not fence_table(fenced, "t", writer="group:g", epoch=2), "already there: nothing written"
    assert not fence_table(fenced, "t", writer="group:g", epoch=1), "a lower epoch never lowers it"
    assert fence_table(fenced, "t", writer="group:g", epoch=3) and fence_epoch(DeltaTable(path), "group:g") == 3


def test_each_writer_has_its_own_fence_in_its_own_epochs(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": [1]}))

    assert fence_table(DeltaTable(path), "t", writer="job-a", epoch=12)  # the job's maintenance, job epoch 12
    assert fence_table(DeltaTable(path), "t", writer="group:g", epoch=1), "the group's table epoch 1 is its own"
    both = DeltaTable(path)
    assert (fence_epoch(both, "job-a"), fence_epoch(both, "group:g"), fence_epoch(both, "job-b")) == (12, 1, None)
