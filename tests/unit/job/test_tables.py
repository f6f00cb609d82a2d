"""Which of the store's tables a job tiers (tiering.job.tables)."""

from __future__ import annotations

import pytest

from tests.unit.job.catalog import Catalog, config
from tiering.job.tables import included_tables

pytestmark = pytest.mark.unit


def test_included_tables_are_the_stores_tables_the_config_selects_sorted():
    store = Catalog("users", "orders_tmp", "orders", "orders_eu", "audit")

    assert included_tables(config(), store) == ["audit", "orders", "orders_eu", "orders_tmp", "users"]
    assert included_tables(config(include=["orders*"], exclude=["*_tmp"]), store) == ["orders", "orders_eu"]
    assert included_tables(config(include=["nothing*"]), store) == []
