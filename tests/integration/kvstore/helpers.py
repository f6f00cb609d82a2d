"""Shared helpers of the store's integration tests: table specs, waiting for GC passes, memory."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from tiering.kvstore.client import KvStoreClient
from tiering.kvstore.models import TableSpec

T = TypeVar("T")


def orders_spec(name: str = "orders", num_buckets: int = 1) -> TableSpec:
    return TableSpec(
        name=name,
        schema=[{"name": "id", "type": "bigint"}, {"name": "amount", "type": "double"}, {"name": "note", "type": "string"}],
        primary_key=["id"],
        num_buckets=num_buckets,
    )


def wait_until(predicate: Callable[[], T], what: str, timeout_s: float = 15.0) -> T:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def gc_runs(client: KvStoreClient) -> float:
    return float(re.search(r"^kvstore_gc_runs_total (\S+)$", client.metrics(), re.M).group(1))


def wait_gc_passes(client: KvStoreClient, passes: int = 2) -> None:
    """Wait until ``passes`` complete GC passes started after this call (the first may be mid-way)."""
    start = gc_runs(client)
    wait_until(lambda: gc_runs(client) >= start + passes + 1, f"{passes} GC passes")


def memory_mb(pid: int, field: str = "VmRSS") -> float:
    """``VmRSS`` (now) or ``VmHWM`` (peak) of a process in MB, from /proc (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")
