"""Bad input is refused with a 4xx naming the field; the store keeps serving and nothing changes."""

from __future__ import annotations

import pyarrow as pa
import pytest
import requests

from tests.support.store import orders_spec
from tiering.errors import (
    BadRequestError,
    ConflictError,
    NotFoundError,
    TableNotFoundError,
    UnauthorizedError,
)
from tiering.kvstore.models import LakeReport

pytestmark = pytest.mark.integration


def _state(client):
    snaps = client.latest_snapshots("orders")
    return client.log_info("orders"), [(s.snapshot_id, s.row_count) for s in snaps.buckets]


def test_bad_requests_name_the_field_and_change_nothing(kv_store):
    client = kv_store.client()
    info = client.create_table(orders_spec(num_buckets=2))
    client.upsert("orders", [{"id": 1, "amount": 1.0, "note": "a"}, {"id": 2, "amount": 2.0}])
    client.take_snapshots("orders")
    before = _state(client)

    refused = [
        (
            BadRequestError,
            "rows[1].amount: expected double",
            lambda: client.upsert("orders", [{"id": 3, "amount": 3.0}, {"id": 4, "amount": "four"}]),
        ),
        (
            BadRequestError,
            "rows[0].colour: not a column",
            lambda: client.upsert("orders", [{"id": 5, "colour": "red"}]),
        ),
        (
            BadRequestError,
            "rows[0].id: primary-key column must not be null",
            lambda: client.upsert("orders", [{"amount": 1.0}]),
        ),
        (
            BadRequestError,
            "rows[0].amount: delete rows carry primary-key columns only",
            lambda: client.delete("orders", [{"id": 1, "amount": 1.0}]),
        ),
        (
            BadRequestError,
            "rows[0].id: 9223372036854775808 is out of range",
            lambda: client.upsert("orders", [{"id": 2**63}]),
        ),
        (
            BadRequestError,
            "column 'amount': expected double, got Arrow type string",
            lambda: client.write_arrow("orders", pa.table({"id": pa.array([7], pa.int64()), "amount": ["x"]})),
        ),
        (
            BadRequestError,
            "column 'id': primary-key column is missing",
            lambda: client.write_arrow("orders", pa.table({"amount": [1.0]})),
        ),
        (
            BadRequestError,
            "column 'id': cannot convert double to bigint without loss",
            lambda: client.write_arrow("orders", pa.table({"id": [1.5], "amount": [1.0]})),
        ),
        (TableNotFoundError, "table 'nope' does not exist", lambda: client.upsert("nope", [{"id": 1}])),
        (ConflictError, "table 'orders' already exists", lambda: client.create_table(orders_spec())),
        (NotFoundError, "has no bucket 7", lambda: client.get_snapshot("orders", 7, 1)),
        (
            BadRequestError,
            "buckets.9: not a bucket",
            lambda: client.report_lake(
                "orders", LakeReport(table_id=info.table_id, epoch=1, lake_version=1, buckets={"9": 0})
            ),
        ),
        (
            BadRequestError,
            "buckets.0: offset 99 is outside",
            lambda: client.report_lake(
                "orders", LakeReport(table_id=info.table_id, epoch=1, lake_version=1, buckets={"0": 99})
            ),
        ),
    ]
    for error, message, call in refused:
        with pytest.raises(error) as raised:
            call()
        assert message in str(raised.value), str(raised.value)
        assert raised.value.status in (400, 404, 409)

    raw = [  # bodies no typed client would send: malformed JSON, missing and wrongly typed fields
        ("POST", "/v1/tables/orders/rows", b'{"op": "upsert", "rows": [', "body: Invalid JSON"),
        ("POST", "/v1/tables/orders/rows", b'{"op": "merge", "rows": []}', "op: String should match pattern"),
        (
            "POST",
            "/v1/tables",
            b'{"name": "t", "schema": [{"name": "id", "type": "bigint"}], "primary_key": ["id"]}',
            "num_buckets: Field required",
        ),
        (
            "POST",
            "/v1/tables",
            b'{"name": "t", "schema": [{"name": "id", "type": "varchar"}], "primary_key": ["id"], "num_buckets": 1}',
            "schema[0].type: unsupported type 'varchar'",
        ),
        ("POST", "/v1/leases/job/acquire", b'{"epoch": 1, "snapshots": []}', "duration_ms: Field required"),
        ("POST", "/v1/tables/orders/rows?op=upsert", b"not arrow", "body: not an Arrow IPC stream"),
        ("GET", "/v1/tables/orders/buckets/x/snapshots/1", b"", "bucket: Input should be a valid integer"),
    ]
    for method, path, body, message in raw:
        headers = {"Content-Type": "application/vnd.apache.arrow.stream"} if body == b"not arrow" else {}
        response = requests.request(method, kv_store.url + path, data=body, headers=headers, timeout=10)
        assert response.status_code == 400, (path, response.text)
        assert response.json()["error"] == "BAD_REQUEST"
        assert message in response.json()["message"], response.json()

    assert _state(client) == before
    assert client.list_leases() == []
    assert [t.name for t in client.list_tables()] == ["orders"]
    client.upsert("orders", [{"id": 3, "amount": 3.0}])  # still serving
    assert sum(b.log_end_offset for b in client.log_info("orders").buckets) == 3


def test_bearer_token_is_required(store_factory):
    store = store_factory(token="s3cret")
    assert store.client().list_tables() == []
    with pytest.raises(UnauthorizedError) as refused:
        type(store.client())(store.url).list_tables()
    assert refused.value.status == 401 and "GET /v1/tables" in str(refused.value)
    assert type(store.client())(store.url, token="wrong").health()  # health stays open
    response = requests.get(store.url + "/metrics", timeout=10)
    assert response.status_code == 401 and response.json()["error"] == "UNAUTHORIZED"
