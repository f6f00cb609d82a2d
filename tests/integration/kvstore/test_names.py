"""Names that attack (tiering.kvstore.names): refused with a 400 naming them, or handled as data.

Failure modes: a table name reaching a file path (``../x`` writing outside the data dir, ``a/b``
a directory of another table, ``*`` a glob when Spark reads the file), a name reaching SQL
(quotes, keywords), a column named like a system column (``__offset``) corrupting the changelog,
a name breaking the URL it travels in (``?``, ``#``, ``%``). The real store process runs in a
sandbox directory: nothing may appear in the sandbox beside the store's data dir.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import requests

from tests.support.names import (
    ACCEPTED_COLUMN_NAMES,
    ACCEPTED_TABLE_NAMES,
    REFUSED_COLUMN_NAMES,
    REFUSED_TABLE_NAMES,
)
from tests.support.store import emptied
from tiering.errors import BadRequestError
from tiering.kvstore.models import BucketRef, LakeReport, SnapshotRef, TableSpec
from tiering.kvstore.server.process import StoreProcess

pytestmark = pytest.mark.integration


def _spec(name: str, value_column: str = "v") -> TableSpec:
    return TableSpec(
        name=name,
        schema=[{"name": "id", "type": "bigint"}, {"name": value_column, "type": "string"}],
        primary_key=["id"],
        num_buckets=2,
    )


def _raw_create(store: StoreProcess, body: dict) -> requests.Response:
    return requests.post(f"{store.url}/v1/tables", json=body, timeout=10)


@pytest.fixture(scope="module")
def sandboxed_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoreProcess]:
    store = StoreProcess.start(tmp_path_factory.mktemp("sandbox") / "store", gc_interval_s=0.2)
    yield store
    store.kill()


@pytest.fixture
def store(sandboxed_store: StoreProcess) -> StoreProcess:
    emptied(sandboxed_store.client())
    return sandboxed_store


def _assert_contained(store: StoreProcess) -> None:
    """Nothing beside the data dir in the sandbox; every data file below ``<data dir>/remote``."""
    sandbox = store.data_dir.parent
    assert [p.name for p in sandbox.iterdir()] == ["store"]
    remote = (store.data_dir / "remote").resolve()
    for path in store.data_dir.rglob("*"):
        if path.suffix == ".parquet":
            assert path.resolve().is_relative_to(remote), path


def test_unsafe_table_names_are_refused_naming_them(store):
    for name in REFUSED_TABLE_NAMES:
        body = {"name": name, "schema": [{"name": "id", "type": "bigint"}], "primary_key": ["id"], "num_buckets": 1}
        response = _raw_create(store, body)
        assert response.status_code == 400, (name, response.text)
        message = response.json()["message"]
        assert response.json()["error"] == "BAD_REQUEST" and message.startswith("name: "), message
        if name:
            assert repr(name[:80]) in message, (name, message)
    assert store.client().list_tables() == []
    _assert_contained(store)


def test_reserved_and_unsafe_column_names_are_refused_naming_them(store):
    for column in REFUSED_COLUMN_NAMES:
        body = {
            "name": "t",
            "schema": [{"name": "id", "type": "bigint"}, {"name": column, "type": "string"}],
            "primary_key": ["id"],
            "num_buckets": 1,
        }
        response = _raw_create(store, body)
        assert response.status_code == 400, (column, response.text)
        assert response.json()["message"].startswith("schema[1].name: "), response.text
        if column:
            assert repr(column[:80]) in response.json()["message"]
    twins = {
        "name": "t",
        "schema": [{"name": "Id", "type": "bigint"}, {"name": "ID", "type": "string"}],
        "primary_key": ["Id"],
        "num_buckets": 1,
    }
    response = _raw_create(store, twins)
    assert response.status_code == 400 and "duplicate column names" in response.text and "'ID'" in response.text
    assert store.client().list_tables() == []


def test_nasty_table_names_are_data_end_to_end(store):
    """Create, write (JSON and Arrow), delete, snapshot, read the files, lease, report, drop."""
    client = store.client()
    for name in ACCEPTED_TABLE_NAMES:
        info = client.create_table(_spec(name))
        assert info.name == name and client.get_table(name) == info
        client.upsert(name, [{"id": 1, "v": name}, {"id": 2, "v": "two"}])
        client.write_arrow(name, pa.table({"id": pa.array([3], pa.int64()), "v": ["three"]}))
        client.delete(name, [{"id": 2}])
        snapshots = client.take_snapshots(name)
        rows = pa.concat_tables(pq.read_table(f) for s in snapshots.buckets for f in s.files)
        assert sorted(zip(rows["id"].to_pylist(), rows["v"].to_pylist(), strict=False)) == [
            (1, name),
            (3, "three"),
        ], name
        assert sum(b.log_end_offset for b in client.log_info(name).buckets) == 4
        refs = [
            SnapshotRef(table_id=info.table_id, bucket=s.bucket, snapshot_id=s.snapshot_id) for s in snapshots.buckets
        ]
        assert client.acquire_lease(name, epoch=1, duration_ms=60_000, snapshots=refs).unavailable == []
        client.release_lease(name, epoch=1, buckets=[BucketRef(table_id=info.table_id, bucket=0)])
        ends = {str(b.bucket): b.log_end_offset for b in client.log_info(name).buckets}
        client.report_lake(name, LakeReport(table_id=info.table_id, epoch=1, lake_version=1, buckets=ends))
        assert client.get_lake(name).buckets == ends
    assert sorted(t.name for t in client.list_tables()) == sorted(ACCEPTED_TABLE_NAMES)
    _assert_contained(store)
    for name in ACCEPTED_TABLE_NAMES:
        client.drop_lease(name, epoch=1)
        client.drop_table(name)
    assert client.list_tables() == []
    _assert_contained(store)


def test_nasty_column_names_are_data_end_to_end(store):
    client = store.client()
    schema = [{"name": "id", "type": "bigint"}] + [{"name": c, "type": "string"} for c in ACCEPTED_COLUMN_NAMES]
    client.create_table(TableSpec(name="nasty", schema=schema, primary_key=["id"], num_buckets=1))
    client.upsert("nasty", [{"id": 1, **{c: f"json {c}" for c in ACCEPTED_COLUMN_NAMES}}])
    client.write_arrow(
        "nasty", pa.table({"id": pa.array([2], pa.int64()), **{c: [f"arrow {c}"] for c in ACCEPTED_COLUMN_NAMES}})
    )
    (snapshot,) = client.take_snapshots("nasty").buckets
    data = pq.read_table(snapshot.files)
    assert data.column_names == ["id", *ACCEPTED_COLUMN_NAMES, "__offset", "__timestamp"]
    by_id = {r["id"]: r for r in data.to_pylist()}
    assert all(by_id[1][c] == f"json {c}" and by_id[2][c] == f"arrow {c}" for c in ACCEPTED_COLUMN_NAMES)
    with pytest.raises(BadRequestError, match="rows\\[0\\].__op: not a column"):
        client.upsert("nasty", [{"id": 3, "__op": "-D"}])


def test_names_in_urls_reach_no_other_resource(store):
    """Encoded separators and dot segments in the path are names that do not exist, never paths."""
    client = store.client()
    client.create_table(_spec("orders"))
    for path in (
        "/v1/tables/..%2F..%2Fetc",
        "/v1/tables/%2E%2E",
        "/v1/tables/orders%2F..%2Forders",
        "/v1/tables/%2e/log",
        "/v1/tables/orders%00",
    ):
        response = requests.get(store.url + path, timeout=10)
        assert response.status_code == 404, (path, response.text)
        assert response.json()["error"] in ("TABLE_NOT_FOUND", "NOT_FOUND")
    assert [t.name for t in client.list_tables()] == ["orders"]
