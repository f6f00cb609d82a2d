"""A table as the store seam describes it (``StoreTable``), for tests that hand one to the lake's
code without a store: spelled as the reference store's catalog answers it, so its columns' types
are the ones a round meets."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tiering.kvstore.contract import StoreTable
from tiering.kvstore.models import TableInfo
from tiering.kvstore.reference import store_table


def kv_table(
    columns: Mapping[str, str],
    *,
    name: str = "t",
    key: Sequence[str] = ("id",),
    num_buckets: int = 1,
    table_id: int = 1,
) -> StoreTable:
    """``columns`` by name, with their Spark SQL type names, in order."""
    schema = [{"name": column, "type": kind} for column, kind in columns.items()]
    info = TableInfo(name=name, table_id=table_id, num_buckets=num_buckets, primary_key=list(key), schema=schema)
    return store_table(info)
