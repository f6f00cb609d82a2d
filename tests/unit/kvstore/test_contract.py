"""The store seam's values check themselves: a table's key is among its columns, a changelog batch's
columns are the user columns then the system columns."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tiering.kvstore.contract import StoreColumn, StoreTable, changelog_schema

COLUMNS = (StoreColumn("id", "bigint", pa.int64(), nullable=False), StoreColumn("note", "string", pa.string()))


def test_a_key_outside_the_columns_is_refused_naming_the_table():
    with pytest.raises(ValueError, match=r"table 'orders': primary key \['nope'\] not in its columns"):
        StoreTable("orders", 1, COLUMNS, ("nope",), 2)


def test_a_table_without_buckets_is_refused():
    with pytest.raises(ValueError, match="num_buckets must be >= 1"):
        StoreTable("orders", 1, COLUMNS, ("id",), 0)


def test_a_changelog_batch_holds_the_user_columns_nullable_then_the_system_columns():
    schema = changelog_schema(StoreTable("orders", 1, COLUMNS, ("id",), 2))

    assert schema.names == ["id", "note", "__offset", "__op", "__timestamp"]
    assert schema.field("id").nullable and schema.field("__timestamp").type == pa.timestamp("us", tz="UTC")
