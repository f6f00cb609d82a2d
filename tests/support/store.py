"""The store's side of a test: table specs, waiting for GC passes, leases lapsing, memory."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.config import CHAOS_LEASE_S
from tests.support.waiting import STORE_PACE, wait_until
from tiering.kvstore.client import KvStoreClient
from tiering.kvstore.models import TableSpec


def orders_spec(name: str = "orders", num_buckets: int = 1) -> TableSpec:
    return TableSpec(
        name=name,
        schema=[
            {"name": "id", "type": "bigint"},
            {"name": "amount", "type": "double"},
            {"name": "note", "type": "string"},
        ],
        primary_key=["id"],
        num_buckets=num_buckets,
    )


def emptied(client: KvStoreClient) -> KvStoreClient:
    """``client``'s store with every lease and table dropped: a module's shared store, given to its
    next case as a fresh one would be (table ids and ETags aside, which never repeat)."""
    for lease in client.list_leases():
        client.drop_lease(lease.lease_id, epoch=lease.epoch)
    for table in client.list_tables():
        client.drop_table(table.name)
    return client


def gc_runs(client: KvStoreClient) -> float:
    return float(re.search(r"^kvstore_gc_runs_total (\S+)$", client.metrics(), re.M).group(1))


def wait_gc_passes(client: KvStoreClient, passes: int = 2) -> None:
    """Wait until ``passes`` complete GC passes started after this call (the first may be mid-way)."""
    start = gc_runs(client)
    wait_until(lambda: gc_runs(client) >= start + passes + 1, f"{passes} GC passes", **STORE_PACE)


def assert_leases_lapse(client: KvStoreClient, duration_s: float = CHAOS_LEASE_S) -> None:
    """No lease survives its duration: a crashed driver's lease expires, a live one was dropped."""
    wait_until(
        lambda: client.list_leases() == [],
        f"every lease to lapse within {duration_s}s",
        timeout_s=duration_s + 5,
        interval_s=0.25,
    )


def memory_mb(pid: int, field: str = "VmRSS") -> float:
    """``VmRSS`` (now) or ``VmHWM`` (peak) of a process in MB, from /proc (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")
