"""A store behind the seam, in memory (tests/support/memory_store.py), and a lease on it: table
``a`` (table_id 1, three buckets) and ``b`` (table_id 2, two), each bucket with snapshot 1 at
offset 10."""

from __future__ import annotations

import pytest

from tests.support.memory_store import MemoryStore
from tests.support.tables import kv_table
from tiering.lease.job_lease import JobLease

LEASE = "L"
DURATION_MS = 9000


@pytest.fixture
def store() -> MemoryStore:
    store = MemoryStore(
        [
            kv_table({"id": "bigint"}, name="a", table_id=1, num_buckets=3),
            kv_table({"id": "bigint"}, name="b", table_id=2, num_buckets=2),
        ]
    )
    for table in store.tables():
        for bucket in range(table.num_buckets):
            store.snapshot(table.name, bucket, 1, 10)
    store.calls.clear()
    return store


@pytest.fixture
def lease(store: MemoryStore) -> JobLease:
    return JobLease(store, LEASE, 1, DURATION_MS)
