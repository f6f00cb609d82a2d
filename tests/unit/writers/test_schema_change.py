"""Which KV schema changes the lake follows (columns added) and which fail the table, named."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import Schema

from tiering.delta_log.layout import lake_schema
from tiering.errors import LakeCommitError
from tiering.kvstore.contract import StoreTable
from tiering.kvstore.models import TableInfo
from tiering.kvstore.reference import store_table
from tiering.writers.schema_change import added_columns

pytestmark = pytest.mark.unit

URI = "file:///lake/orders"


def kv_table(*columns: tuple[str, str]) -> StoreTable:
    return store_table(
        TableInfo(
            name="orders",
            table_id=1,
            num_buckets=2,
            primary_key=["id"],
            schema=[{"name": n, "type": t} for n, t in columns],
        )
    )


ORDERS = kv_table(("id", "bigint"), ("price", "decimal(10,2)"))


def schema(table: StoreTable, *extra: pa.Field) -> Schema:
    """The table's lake schema as Delta holds it, with ``extra`` after the user columns."""
    lake = lake_schema(table)
    for f in extra:
        lake = lake.insert(len(table.columns), f)
    return Schema.from_arrow(lake)


def grown(*columns: tuple[str, str]) -> StoreTable:
    return kv_table(("id", "bigint"), ("price", "decimal(10,2)"), *columns)


def test_the_same_schema_adds_nothing():
    assert added_columns("orders", URI, schema(ORDERS), schema(ORDERS)) == ()


def test_new_nullable_columns_are_added_in_the_kv_order():
    kv = grown(("region", "string"), ("score", "int"))
    assert added_columns("orders", URI, schema(ORDERS), schema(kv)) == ("region", "score")


def test_column_order_is_not_compared():
    """delta-spark appends an added column after the system columns."""
    kv = grown(("region", "string"))
    delta = Schema.from_arrow(lake_schema(ORDERS).append(pa.field("region", pa.string())))
    assert added_columns("orders", URI, delta, schema(kv)) == ()


@pytest.mark.parametrize(
    "delta, kv, message",
    [
        (
            schema(ORDERS, pa.field("note", pa.string())),
            schema(ORDERS),
            "column 'note' is in Delta but not in the KV table; expected every Delta column to stay",
        ),
        (
            schema(ORDERS),
            schema(kv_table(("id", "bigint"), ("price", "double"))),
            "column 'price' is double in the KV table but decimal(10,2) in Delta; expected decimal(10,2)",
        ),
        (
            schema(ORDERS),
            schema(ORDERS, pa.field("region", pa.string(), nullable=False)),
            "new column 'region' is NOT NULL in the KV table; expected a nullable column",
        ),
        (
            Schema.from_arrow(lake_schema(ORDERS).remove(lake_schema(ORDERS).get_field_index("__offset"))),
            schema(ORDERS),
            "system column '__offset' is missing in Delta",
        ),
    ],
    ids=["dropped", "type-changed", "not-null-added", "system-column-missing"],
)
def test_changes_the_lake_cannot_follow_name_the_table_and_the_column(delta, kv, message):
    with pytest.raises(LakeCommitError) as err:
        added_columns("orders", URI, delta, kv)

    assert err.value.table == "orders"
    assert str(err.value).startswith(f"table 'orders': the Delta table at {URI} cannot follow the KV table's schema: ")
    assert message in str(err.value)


def test_every_problem_is_named_at_once():
    delta = schema(ORDERS, pa.field("note", pa.string()))
    kv = schema(ORDERS, pa.field("region", pa.string(), nullable=False))
    with pytest.raises(LakeCommitError, match="column 'note' is in Delta.*new column 'region' is NOT NULL"):
        added_columns("orders", URI, delta, kv)
