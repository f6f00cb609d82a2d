"""Regressions of hostile input found by fuzzing and by reading the parsers: each request here
once crashed the store, answered 500, or was accepted and broke a later read. Now each is a
400 naming the field (or a 405 telling the truth), the store keeps serving, nothing changed.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
import requests

from tiering.kvstore.models import TableSpec
from tiering.kvstore.server.process import StoreProcess

pytestmark = pytest.mark.integration

INT64_OVERFLOW = 2**63


def _arrow(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write(table)
    return sink.getvalue().to_pybytes()


def _with_lying_offsets() -> bytes:
    """A valid-looking stream whose string offsets point 1 GiB past its 8 data bytes: reading
    it without full validation and writing it to Parquet was a segmentation fault."""
    body = bytearray(_arrow(pa.table({"id": pa.array([7], pa.int64()), "note": ["abcdefgh"]})))
    at = body.find((0).to_bytes(4, "little") + (8).to_bytes(4, "little") + b"abcdefgh")
    body[at + 4 : at + 8] = (2**30).to_bytes(4, "little")
    return bytes(body)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One store for every case: each checks that it is alive and unchanged after its request,
    so a case that broke it fails there, not in the next; a process per case cost its start."""
    kv_store = StoreProcess.start(tmp_path_factory.mktemp("kvstore"))
    client = kv_store.client()
    client.create_table(
        TableSpec(
            name="t",
            schema=[
                {"name": "id", "type": "bigint"},
                {"name": "amount", "type": "double"},
                {"name": "note", "type": "string"},
                {"name": "at", "type": "timestamp"},
            ],
            primary_key=["id"],
            num_buckets=2,
        )
    )
    client.create_table(
        TableSpec(
            name="events",
            schema=[{"name": "at", "type": "timestamp"}, {"name": "day", "type": "date"}],
            primary_key=["at"],
            num_buckets=1,
        )
    )
    yield kv_store
    kv_store.stop()


ARROW = {"Content-Type": "application/vnd.apache.arrow.stream"}
CASES = [
    # (what it once did, method, path, body, headers, status, message)
    (
        "segfault",
        "POST",
        "/v1/tables/t/rows?op=upsert",
        _with_lying_offsets(),
        ARROW,
        400,
        "body: not an Arrow IPC stream: Column 1: In chunk 0: Invalid: Length spanned by binary offsets",
    ),
    (
        "500 OverflowError",
        "POST",
        "/v1/tables/t/rows",
        b'{"op": "upsert", "rows": [{"id": 1, "amount": 1' + b"0" * 400 + b"}]}",
        {},
        400,
        "rows[0].amount: 1" + "0" * 100,
    ),
    (
        "500 on the key's read",
        "POST",
        "/v1/tables/events/rows",
        b'{"op": "upsert", "rows": [{"at": "9999-12-31T23:59:00-01:00"}]}',
        {},
        400,
        "rows[0].at: '9999-12-31T23:59:00-01:00' is out of range for timestamp",
    ),
    (
        "accepted, unreadable",
        "POST",
        "/v1/tables/events/rows?op=upsert",
        _arrow(pa.table({"at": pa.array([2**62], pa.timestamp("us", tz="UTC"))})),
        ARROW,
        400,
        "column 'at': values must lie in 0001-01-01..9999-12-31",
    ),
    (
        "accepted, unreadable",
        "POST",
        "/v1/tables/events/rows?op=upsert",
        _arrow(pa.table({"at": pa.array([0], pa.timestamp("us")), "day": pa.array([2**31 - 1], pa.date32())})),
        ARROW,
        400,
        "column 'day': values must lie in 0001-01-01..9999-12-31",
    ),
    (
        "500 int('²')",
        "PUT",
        "/v1/tables/t/lake",
        b'{"table_id": 1, "epoch": 1, "lake_version": 1, "buckets": {"\xc2\xb2": 0}}',
        {},
        400,
        "buckets.\u00b2.[key]: String should match pattern",
    ),
    (
        "500 int() of 5000 digits",
        "PUT",
        "/v1/tables/t/lake",
        b'{"table_id": 1, "epoch": 1, "lake_version": 1, "buckets": {"' + b"1" * 5000 + b'": 0}}',
        {},
        400,
        "String should match pattern",
    ),
    (
        "500 SQLite overflow",
        "GET",
        f"/v1/tables/t/buckets/0/snapshots/{INT64_OVERFLOW}",
        b"",
        {},
        400,
        "snapshot_id: Input should be less than or equal to 9223372036854775807",
    ),
    (
        "500 SQLite overflow",
        "GET",
        f"/v1/tables/t/buckets/0/log?to={INT64_OVERFLOW}",
        b"",
        {},
        400,
        "to: Input should be less than or equal to",
    ),
    (
        "500 SQLite overflow",
        "POST",
        "/v1/leases/job/acquire",
        f'{{"duration_ms": 1000, "epoch": {INT64_OVERFLOW}, "snapshots": []}}'.encode(),
        {},
        400,
        "epoch: Input should be less than or equal to",
    ),
    (
        "500 SQLite overflow",
        "POST",
        "/v1/leases/job/acquire",
        f'{{"duration_ms": {2**63 - 2}, "epoch": 1, "snapshots": []}}'.encode(),
        {},
        400,
        "duration_ms: Input should be less than or equal to 4611686018427387904",
    ),
    (
        "500 SQLite overflow",
        "POST",
        "/v1/leases/job/acquire",
        f'{{"duration_ms": 1000, "epoch": 1, "snapshots": [{{"table_id": {INT64_OVERFLOW}, "bucket": 0, '
        f'"snapshot_id": 1}}]}}'.encode(),
        {},
        400,
        "snapshots[0].table_id: Input should be less than or equal to",
    ),
    (
        "accepted false as 0",
        "POST",
        "/v1/leases/job/acquire",
        b'{"duration_ms": 1000, "epoch": 1, "snapshots": [{"table_id": 1, "bucket": 0, "snapshot_id": false}]}',
        {},
        400,
        "snapshots[0].snapshot_id: Input should be a valid integer",
    ),
    (
        'accepted "5" as 5',
        "POST",
        "/v1/tables",
        b'{"name": "x", "schema": [{"name": "id", "type": "int"}], "primary_key": ["id"], "num_buckets": "5"}',
        {},
        400,
        "num_buckets: Input should be a valid integer",
    ),
    (
        "accepted",
        "POST",
        "/v1/tables",
        b'{"name": "x", "schema": [{"name": "id", "type": "int"}], "primary_key": ["id", "id"], "num_buckets": 1}',
        {},
        400,
        "primary_key names a column twice",
    ),
]


@pytest.mark.parametrize(
    ("once", "method", "path", "body", "headers", "status", "message"),
    CASES,
    ids=[f"{c[1]} {c[2][:40]} ({c[0]})" for c in CASES],
)
def test_hostile_request_is_refused_clearly(store, once, method, path, body, headers, status, message):
    client = store.client()
    before = (client.list_tables(), client.log_info("t"), client.log_info("events"), client.list_leases())
    response = requests.request(method, store.url + path, data=body, headers=headers, timeout=30)
    assert response.status_code == status, response.text
    assert response.json()["error"] == "BAD_REQUEST" and message in response.json()["message"], response.json()
    assert store.alive() and client.health()
    assert (client.list_tables(), client.log_info("t"), client.log_info("events"), client.list_leases()) == before


def test_405_names_every_method_of_the_path(kv_store):
    """Starlette's own Allow named the first matching route's methods only (``DELETE`` for a
    lease, which also has ``GET``): a client trusting it would not know GET exists."""
    response = requests.request("PATCH", f"{kv_store.url}/v1/leases/job", timeout=10)
    assert response.status_code == 405 and response.json()["error"] == "METHOD_NOT_ALLOWED"
    assert response.headers["Allow"] == "DELETE, GET"
