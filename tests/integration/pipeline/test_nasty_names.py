"""Names that attack, end to end: store -> tiering job -> Delta.

Every table and column name the store accepts (tests/support/names.py holds the lists,
tests/integration/kvstore/test_names.py the refusals) is tiered row for row in one round, next
to a plainly named table: the lake directory of each table is one segment under the lake root
(its name, ``%?#[]~`` escaped: ``tiering.delta_log.layout.lake_directory``), never a path
outside it; no name breaks the round of the other tables. Two rounds run: the bootstrap
(snapshot splits) and a changelog round with updates and deletes on top.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from tests.support.config import make_config
from tests.support.names import ACCEPTED_COLUMN_NAMES, ACCEPTED_TABLE_NAMES
from tiering.conf.model import TieringConfig
from tiering.context import TermContext
from tiering.delta_log.lake import Lake
from tiering.delta_log.layout import lake_directory
from tiering.job import TieringJob
from tiering.kvstore.client import KvStoreClient
from tiering.kvstore.models import TableSpec

pytestmark = pytest.mark.integration

COLUMNS = ["id", *ACCEPTED_COLUMN_NAMES]
#: What an ``s3://`` URL could misread (query, fragment, percent escapes, a host), and a few more.
S3_NAMES = ["?query#frag", "50%", "%2e%2e", "[glob]?", "~user", "with space", "ünïcödé", "it's", "a:b", "{a,b}", "*"]


class NamedTable:
    """A store table with every accepted column name, and the rows it should hold."""

    def __init__(self, client: KvStoreClient, name: str) -> None:
        self.client, self.name = client, name
        schema = [{"name": "id", "type": "bigint"}] + [{"name": c, "type": "string"} for c in ACCEPTED_COLUMN_NAMES]
        client.create_table(TableSpec(name=name, schema=schema, primary_key=["id"], num_buckets=2))
        self.rows: dict[int, dict] = {}

    def upsert(self, ids: range, tag: str) -> None:
        rows = [{"id": i, **{c: f"{tag} {self.name} {c} {i}" for c in ACCEPTED_COLUMN_NAMES}} for i in ids]
        self.client.write_arrow(self.name, pa.Table.from_pylist(rows, schema=_arrow_schema()))
        self.rows.update({r["id"]: r for r in rows})

    def delete(self, ids: range) -> None:
        self.client.delete(self.name, [{"id": i} for i in ids])
        for i in ids:
            self.rows.pop(i)


def _arrow_schema() -> pa.Schema:
    return pa.schema([("id", pa.int64()), *((c, pa.string()) for c in ACCEPTED_COLUMN_NAMES)])


def _lake_rows(lake: Lake, table: str) -> dict[int, dict]:
    data = lake.load(table).to_arrow().select(COLUMNS)
    return {r["id"]: r for r in data.to_pylist()}


def tier_twice(spark, client: KvStoreClient, config: TieringConfig, names: list[str]) -> list[NamedTable]:
    """Create the tables, tier a bootstrap round and a changelog round; row-for-row checked."""
    tables = [NamedTable(client, name) for name in ["plain", *names]]
    for t in tables:
        t.upsert(range(6), "first")
        client.take_snapshots(t.name)
    first = TieringJob(spark, TermContext.begin(config, 1)).run()
    for t in tables:
        t.upsert(range(4, 9), "second")
        t.delete(range(0, 2))
    second = TieringJob(spark, TermContext.begin(config, 2)).run()

    assert first.ok and second.ok, (first.failed_tables, second.failed_tables)
    lake = Lake.of(config.lake)
    for t in tables:
        assert _lake_rows(lake, t.name) == t.rows, t.name
    assert client.list_leases() == []
    return tables


def test_every_accepted_name_is_tiered_row_for_row_inside_a_local_lake(spark, kv_store, tmp_path):
    beside = set(os.listdir(tmp_path.parent))
    config = make_config(tmp_path, kv_store.url, "127.0.0.1:1")

    tables = tier_twice(spark, kv_store.client(), config, ACCEPTED_TABLE_NAMES)

    lake_root = Path(config.lake.root)
    assert sorted(os.listdir(lake_root)) == sorted(lake_directory(t.name) for t in tables), "one directory per table"
    assert set(os.listdir(tmp_path)) == {"lake", "ckpt"}, "nothing written beside the lake root"
    assert set(os.listdir(tmp_path.parent)) == beside, "nothing written above it"


def test_names_with_url_specials_are_tiered_row_for_row_inside_an_s3_lake(
    spark, kv_store, s3_server, s3_root, tmp_path
):
    config = make_config(
        tmp_path, kv_store.url, "127.0.0.1:1", **{"lake.root": s3_root, "lake.storage": s3_server.storage_options()}
    )

    tables = tier_twice(spark, kv_store.client(), config, S3_NAMES)

    store = Lake.of(config.lake).store
    listed = store.filesystem.get_file_info(pafs.FileSelector(store.path(s3_root)))
    assert sorted(i.base_name for i in listed) == sorted(lake_directory(t.name) for t in tables), "one prefix per table"
