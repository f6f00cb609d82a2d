"""With a token set, every endpoint but /v1/health refuses a missing or wrong token — and the
token never reaches the store's log or its command line.

Failure modes: a route added later that forgets auth (this test walks the served OpenAPI
document, so a new route is covered the day it exists), an unknown path answering 404 to
strangers (telling them which routes exist), a token logged on a failed request.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import requests

from tests.support.store import orders_spec

pytestmark = pytest.mark.integration

TOKEN = "s3cret-Token-7f1e"
WRONG = [
    "",
    "Bearer",
    "Bearer ",
    f"Bearer {TOKEN[:-1]}",
    f"Bearer {TOKEN}x",
    f"bearer {TOKEN}",
    TOKEN,
    f"Basic {TOKEN}",
    f"Bearer  {TOKEN}",
]
PATH_VALUES = {"name": "orders", "lease_id": "job", "bucket": "0", "snapshot_id": "1"}


def _operations(url: str) -> list[tuple[str, str]]:
    document = requests.get(f"{url}/openapi.json", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10).json()
    return [
        (method.upper(), re.sub(r"\{(\w+)\}", lambda m: PATH_VALUES[m.group(1)], path))
        for path, operations in document["paths"].items()
        for method in operations
    ]


def test_every_endpoint_but_health_needs_the_token(store_factory):
    store = store_factory(token=TOKEN)
    store.client().create_table(orders_spec())
    operations = _operations(store.url) + [("GET", "/openapi.json"), ("GET", "/no/such/path"), ("POST", "/v1/health")]
    assert len(operations) >= 24
    for method, path in operations:
        for header in WRONG:
            headers = {"Authorization": header} if header else {}
            response = requests.request(
                method, store.url + path, headers=headers, params={"epoch": 1}, json={}, timeout=10
            )
            if path == "/v1/health":
                assert response.status_code in (200, 405), (method, path, response.text)
                continue
            assert response.status_code == 401, (method, path, header, response.status_code, response.text)
            assert response.json()["error"] == "UNAUTHORIZED"
    assert [t.name for t in store.client().list_tables()] == ["orders"]  # refused requests changed nothing
    assert store.client().list_leases() == []
    for method, path in operations:
        response = requests.request(
            method,
            store.url + path,
            headers={"Authorization": f"Bearer {TOKEN}"},
            params={"epoch": 1},
            json={},
            timeout=10,
        )
        assert response.status_code != 401, (method, path, response.text)


def test_the_token_stays_out_of_logs_and_the_command_line(store_factory):
    store = store_factory(token=TOKEN)
    assert TOKEN not in Path(f"/proc/{store.pid}/cmdline").read_bytes().decode(errors="replace")
    client = store.client()
    client.create_table(orders_spec())
    client.upsert("orders", [{"id": 1}])
    for header in WRONG:
        requests.post(f"{store.url}/v1/tables/orders/rows", headers={"Authorization": header}, json={}, timeout=10)
    requests.post(
        f"{store.url}/v1/tables/orders/rows", headers={"Authorization": f"Bearer {TOKEN}"}, data=b"{broken", timeout=10
    )  # a refused request with the right token
    store.stop()
    log = (store.data_dir / "store.log").read_text()
    assert "kv-store serving" in log and "auth on" in log  # the log is there and was written
    assert TOKEN not in log and TOKEN[:-1] not in log
