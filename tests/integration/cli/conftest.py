"""The CLI tests' cases share their module's store, emptied of tables and leases before each
(tests/fixtures/store.py): most run a command or two against it, where a store of their own costs a
process start. A case that stops, kills or breaks its store starts its own (``store_factory``)."""

from __future__ import annotations

import pytest


@pytest.fixture
def kv_store(emptied_kv_store):
    return emptied_kv_store
