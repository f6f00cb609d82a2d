"""Schema evolution upstream: ``POST /v1/tables/{t}/columns`` appends a nullable column.

Failure modes: files rewritten (a reader holding a leased snapshot would see it change under
it), rows written before the add read as anything but null, a write after the add refused or
losing the new column, a bad add (unknown type, duplicate, reserved, non-nullable) changing the
table anyway, and the grown schema lost on a kill -9.
"""

from __future__ import annotations

import signal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import requests

from tests.support.store import orders_spec
from tiering.errors import BadRequestError, TableNotFoundError

pytestmark = pytest.mark.integration


@pytest.fixture
def kv_store(emptied_kv_store):
    """The module's cases share one store, emptied of tables and leases before each."""
    return emptied_kv_store


def _snapshot_rows(client, table: str) -> dict[int, dict]:
    snapshots = client.take_snapshots(table).buckets
    data = pa.concat_tables(pq.read_table(f) for s in snapshots for f in s.files)
    return {r["id"]: r for r in data.to_pylist()}


def test_added_column_is_null_before_and_written_after(store_factory):
    store = store_factory()
    client = store.client()
    client.create_table(orders_spec(num_buckets=2))
    client.upsert("orders", [{"id": i, "amount": float(i)} for i in range(4)])
    before = client.take_snapshots("orders").buckets
    old_segments = [
        s
        for b in client.log_info("orders").buckets
        for s in client.log_segments("orders", b.bucket, 0, b.log_end_offset)
    ]

    grown = client.add_column("orders", "region", "STRING")
    assert [(c.name, c.type) for c in grown.columns] == [
        ("id", "bigint"),
        ("amount", "double"),
        ("note", "string"),
        ("region", "string"),
    ]
    assert client.get_table("orders") == grown

    client.upsert("orders", [{"id": 1, "amount": 1.5, "region": "eu"}, {"id": 9, "amount": 9.0}])
    client.write_arrow("orders", pa.table({"id": pa.array([10], pa.int64()), "region": ["us"]}))
    rows = _snapshot_rows(client, "orders")
    assert {i: r["region"] for i, r in rows.items()} == {0: None, 1: "eu", 2: None, 3: None, 9: None, 10: "us"}
    assert rows[1]["amount"] == 1.5 and rows[10]["amount"] is None

    # What was written before keeps its schema: files are immutable, readers fill the null.
    for snap in before:
        assert "region" not in pq.read_schema(snap.files[0]).names
    for seg in old_segments:
        assert "region" not in pq.read_schema(seg.file).names
    new_segments = [
        s
        for b in client.log_info("orders").buckets
        for s in client.log_segments("orders", b.bucket, 0, b.log_end_offset)
        if s not in old_segments
    ]
    assert new_segments and all(
        pq.read_schema(s.file).names[:4] == ["id", "amount", "note", "region"] for s in new_segments
    )

    client.add_column("orders", "price", "decimal(10, 2)")
    client.upsert("orders", [{"id": 2, "price": "3.25"}])
    assert str(_snapshot_rows(client, "orders")[2]["price"]) == "3.25"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"name": "x", "type": "varchar"}, "type: unsupported type 'varchar'"),
        ({"name": "amount", "type": "double"}, "name: table 'orders' already has a column 'amount'"),
        ({"name": "AMOUNT", "type": "double"}, "name: table 'orders' already has a column 'AMOUNT'"),
        ({"name": "__bucket", "type": "int"}, "name: column name '__bucket' is reserved"),
        ({"name": "x", "type": "int", "nullable": False}, "nullable: only nullable columns can be added"),
        ({"name": "x", "type": "int", "default": 0}, "default: Extra inputs are not permitted"),
        ({"name": "", "type": "int"}, "name: column name '' must not be empty"),
        ({"type": "int"}, "name: Field required"),
    ],
)
def test_bad_column_adds_name_the_field_and_change_nothing(kv_store, body, message):
    client = kv_store.client()
    info = client.create_table(orders_spec())
    response = requests.post(f"{kv_store.url}/v1/tables/orders/columns", json=body, timeout=10)
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "BAD_REQUEST" and message in response.json()["message"], response.json()
    assert client.get_table("orders") == info
    with pytest.raises(BadRequestError, match="rows\\[0\\].x: not a column"):
        client.upsert("orders", [{"id": 1, "x": 1}])


def test_add_column_to_an_unknown_table_is_404(kv_store):
    with pytest.raises(TableNotFoundError):
        kv_store.client().add_column("nope", "x", "int")


def test_grown_schema_survives_kill_9(store_factory):
    store = store_factory()
    client = store.client()
    client.create_table(orders_spec())
    client.upsert("orders", [{"id": 1, "amount": 1.0}])
    grown = client.add_column("orders", "region", "string")
    store.kill(signal.SIGKILL)
    store.restart()
    assert client.get_table("orders") == grown
    client.upsert("orders", [{"id": 1, "region": "eu"}])
    assert _snapshot_rows(client, "orders")[1]["region"] == "eu"
    (bucket,) = client.log_info("orders").buckets
    (last,) = client.log_segments("orders", 0, bucket.log_end_offset - 1, bucket.log_end_offset)
    assert pq.read_table(last.file).column("__op").to_pylist() == ["+U"]
