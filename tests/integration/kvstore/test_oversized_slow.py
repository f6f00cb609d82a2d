"""Oversized and slow input: a body over ``--max-body-bytes`` is a 413 (before it is read when
its length is announced), a client stalling mid-body holds only its own request, and a
10^6-row JSON write is accepted without taking the process down.

Failure modes: one client exhausting the store's memory with a body it never needed to read;
a few stalled uploads (slowloris) starving every other client; our own client retrying an
oversized write for 30 s as if the store were down.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time

import pyarrow as pa
import pytest
import requests

from tests.support.store import memory_mb, orders_spec
from tiering.errors import BadRequestError

pytestmark = pytest.mark.integration

LIMIT = 1_000_000


def _rows(n: int) -> list[dict]:
    return [{"id": i, "amount": i / 2, "note": "n"} for i in range(n)]


def _too_large(what: str) -> dict:
    return {
        "error": "PAYLOAD_TOO_LARGE",
        "message": f"body: {what} is over the store's limit of {LIMIT} bytes (--max-body-bytes)",
    }


def test_bodies_over_the_limit_are_413_and_change_nothing(store_factory):
    store = store_factory(max_body_bytes=LIMIT)
    client = store.client()
    client.create_table(orders_spec(num_buckets=2))
    client.upsert("orders", _rows(10))

    announced = requests.post(f"{store.url}/v1/tables/orders/rows", data=b"x" * (LIMIT + 1), timeout=30)
    streamed = requests.post(f"{store.url}/v1/tables/orders/rows", data=iter([b"x" * 100_000] * 11), timeout=30)
    assert (announced.status_code, streamed.status_code) == (413, 413), (announced.text, streamed.text)
    assert announced.json() == _too_large(f"Content-Length {LIMIT + 1}")
    # a chunked body is counted as the server receives it: the count is wherever the limit was crossed
    received = re.fullmatch(r"body: at least (\d+) bytes is over .*", streamed.json()["message"])
    assert received and LIMIT < int(received.group(1)) <= 1_100_000, streamed.text
    assert streamed.json() == _too_large(f"at least {received.group(1)} bytes")
    with pytest.raises(BadRequestError) as refused:  # a fact about the request: not retried as "unavailable"
        client.write_arrow("orders", pa.table({"id": pa.array(range(200_000), pa.int64())}))
    assert (refused.value.status, refused.value.code) == (413, "PAYLOAD_TOO_LARGE")
    assert sum(b.log_end_offset for b in client.log_info("orders").buckets) == 10

    client.upsert("orders", _rows(1000))  # ~40 kB: under the limit
    assert sum(b.log_end_offset for b in client.log_info("orders").buckets) == 1010


def _stall(url: str, body: bytes) -> socket.socket:
    """Open a connection, send the headers and half the body, and leave it hanging."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    sock.sendall(
        f"POST /v1/tables/orders/rows HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body[: len(body) // 2]
    )
    return sock


def test_clients_stalling_mid_body_do_not_block_the_others(kv_store):
    client = kv_store.client()
    client.create_table(orders_spec(num_buckets=2))
    body = json.dumps({"op": "upsert", "rows": _rows(100)}).encode()
    stalled = [_stall(kv_store.url, body) for _ in range(50)]  # more than the 40 worker threads
    try:
        for i in range(20):  # answered while all 50 uploads hang half-way
            client.upsert("orders", [{"id": 1000 + i, "amount": 1.0}])
            assert client.health() and client.get_table("orders").name == "orders"
        assert sum(b.log_end_offset for b in client.log_info("orders").buckets) == 20
        for sock in stalled:  # the stalled uploads finish and succeed
            sock.sendall(body[len(body) // 2 :])
        for sock in stalled:
            assert sock.recv(4096).startswith(b"HTTP/1.1 200 "), "a resumed upload failed"
    finally:
        for sock in stalled:
            sock.close()
    assert sum(b.log_end_offset for b in client.log_info("orders").buckets) == 20 + 50 * 100


def test_a_million_json_rows_are_accepted_and_the_store_lives(kv_store, capsys):
    client = kv_store.client(timeout_s=600)
    client.create_table(orders_spec(num_buckets=8))
    body = json.dumps({"op": "upsert", "rows": _rows(1_000_000)}).encode()
    before = memory_mb(kv_store.pid)
    answered: list[requests.Response] = []
    writer = threading.Thread(
        target=lambda: answered.append(
            requests.post(
                f"{kv_store.url}/v1/tables/orders/rows",
                data=body,
                headers={"Content-Type": "application/json"},
                timeout=600,
            )
        )
    )
    writer.start()
    health_meanwhile = 0
    while writer.is_alive():
        health_meanwhile += client.health()
        time.sleep(0.05)
    writer.join()
    (response,) = answered
    assert response.status_code == 200, response.text[:500]
    assert response.json()["records"] == 1_000_000
    assert health_meanwhile > 0 and kv_store.alive()
    assert sum(b.log_end_offset for b in client.log_info("orders").buckets) == 1_000_000
    with capsys.disabled():
        print(
            f"\n10^6 JSON rows ({len(body) / 1e6:.1f} MB body): store RSS {before:.0f} MB before, "
            f"{memory_mb(kv_store.pid):.0f} MB after, peak {memory_mb(kv_store.pid, 'VmHWM'):.0f} MB"
        )


def test_a_refused_million_rows_are_never_read(store_factory):
    store = store_factory(max_body_bytes=8 * 1024 * 1024)
    store.client().create_table(orders_spec())
    body = json.dumps({"op": "upsert", "rows": _rows(1_000_000)}).encode()
    peak_before = memory_mb(store.pid, "VmHWM")
    response = requests.post(f"{store.url}/v1/tables/orders/rows", data=body, timeout=120)
    assert response.status_code == 413 and response.json()["error"] == "PAYLOAD_TOO_LARGE"
    assert memory_mb(store.pid, "VmHWM") - peak_before < len(body) / 2**20 / 2  # not buffered
    assert store.alive() and store.client().log_info("orders").buckets[0].log_end_offset == 0


def test_the_entry_point_refuses_a_useless_limit(tmp_path):
    """``python -m tiering.kvstore.server`` (what StoreProcess runs): bad flags exit 2, named."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tiering.kvstore.server",
            "--data-dir",
            str(tmp_path),
            "--port",
            "0",
            "--max-body-bytes",
            "0",
            "--num-retained",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "--max-body-bytes: must be >= 1, got 0" in proc.stderr and "--num-retained: must be >= 1" in proc.stderr
