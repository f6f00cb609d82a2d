"""The reference store behind the seam (tiering/kvstore/reference.py), against a real store
process: an unchanged listing and unchanged log ends (the store's 304) give back the seam's values
converted last, so an idle planner over 10,000 tables converts nothing; anything that moves them
gives new values."""

from __future__ import annotations

import pytest

from tests.support.store import orders_spec
from tiering.kvstore.reference import ReferenceStore

pytestmark = pytest.mark.integration


@pytest.fixture
def kv_store(emptied_kv_store):
    """The module's cases share one store, emptied of tables and leases before each."""
    return emptied_kv_store


def _rows(first: int, count: int) -> list[dict]:
    return [{"id": i, "amount": i / 2, "note": f"n{i}"} for i in range(first, first + count)]


def test_an_unchanged_listing_and_log_ends_are_the_values_converted_last(kv_store):
    client = kv_store.client()
    for name in ("a", "b"):
        client.create_table(orders_spec(name, num_buckets=2))
    store = ReferenceStore(client)
    tables, logs = store.tables(), store.log_ends()

    tables_again, logs_again = store.tables(), store.log_ends()
    assert [t.name for t in tables_again] == ["a", "b"]
    assert all(new is old for new, old in zip(tables_again, tables, strict=True)), "a 304: nothing converted"
    assert logs_again.keys() == logs.keys() and all(logs_again[n] is logs[n] for n in logs)

    client.upsert("a", _rows(0, 6))
    moved = store.log_ends()
    assert sum(b.end for b in moved["a"].buckets.values()) == 6 and moved["a"] is not logs["a"]
    client.create_table(orders_spec("c"))
    assert [t.name for t in store.tables()] == ["a", "b", "c"]


def test_log_ends_of_named_tables_leave_the_kept_conversion_alone(kv_store):
    client = kv_store.client()
    client.create_table(orders_spec("a"))
    store = ReferenceStore(client)
    every = store.log_ends()
    assert store.log_ends(["a", "gone"]) == {"a": every["a"]}
    assert store.log_ends([]) == {}
    assert store.log_ends()["a"] is every["a"]
