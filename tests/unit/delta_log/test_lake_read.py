"""A Delta log the object store cannot give back is a LakeReadError naming the table and where it is."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from deltalake.fs import DeltaStorageHandler

from tiering.conf.model import LakeConfig
from tiering.delta_log.lake import Lake, LakeTables
from tiering.errors import LakeReadError
from tiering.round.table_states import FailureCause, cause_of

pytestmark = pytest.mark.unit


def test_an_unreadable_delta_log_names_the_table_and_its_location_and_reads_as_a_lake_cause(tmp_path):
    tables = LakeTables(Lake.of(LakeConfig(root=str(tmp_path))))
    write_deltalake(str(tmp_path / "t"), pa.table({"x": [1]}))
    assert tables.load("t") is not None
    write_deltalake(str(tmp_path / "t"), pa.table({"x": [2]}), mode="append")
    (tmp_path / "t" / "_delta_log" / "00000000000000000001.json").write_text("{not json")

    with pytest.raises(LakeReadError) as raised:
        tables.load("t")

    assert raised.value.table == "t" and str(tmp_path / "t") in str(raised.value)
    assert "\n" not in str(raised.value)
    assert cause_of(raised.value) is FailureCause.LAKE_READ
    assert tables.load("missing") is None, "no table yet is not an error"


def test_a_local_lake_is_read_through_pyarrows_own_filesystem(tmp_path, monkeypatch):
    """Not through delta-rs's Python file objects: a process ending soon after such a read aborts
    now and then (delta-rs#2184), and `tiering demo` would exit 134 after verifying every row."""
    opened = []
    open_input_file = DeltaStorageHandler.open_input_file
    monkeypatch.setattr(
        DeltaStorageHandler, "open_input_file", lambda self, path: opened.append(path) or open_input_file(self, path)
    )
    write_deltalake(str(tmp_path / "t"), pa.table({"x": [1, 2]}))

    rows = LakeTables(Lake.of(LakeConfig(root=f"file://{tmp_path}"))).load("t").to_arrow()

    assert sorted(rows.column("x").to_pylist()) == [1, 2]
    assert opened == [], "delta-rs's Python file handler opened the lake's files"
