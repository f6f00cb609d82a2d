"""Fluss column types as the lake reads them: each type a primary-key table can hold, and the refusals."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tiering.errors import SchemaMismatchError
from tiering.fluss.types import store_column


@pytest.mark.parametrize(
    ("fluss_type", "spark_type", "arrow_type"),
    [
        ("boolean", "boolean", pa.bool_()),
        ("tinyint", "tinyint", pa.int8()),
        ("smallint", "smallint", pa.int16()),
        ("int", "int", pa.int32()),
        ("bigint", "bigint", pa.int64()),
        ("float", "float", pa.float32()),
        ("double", "double", pa.float64()),
        ("decimal(10,2)", "decimal(10,2)", pa.decimal128(10, 2)),
        ("decimal(19,4)", "decimal(19,4)", pa.decimal128(19, 4)),
        ("decimal(38, 0)", "decimal(38,0)", pa.decimal128(38, 0)),
        ("decimal(5,5)", "decimal(5,5)", pa.decimal128(5, 5)),
        ("string", "string", pa.string()),
        ("char(3)", "string", pa.string()),
        ("char(1)", "string", pa.string()),
        ("bytes", "binary", pa.binary()),
        ("binary(4)", "binary", pa.binary()),
        ("date", "date", pa.date32()),
        ("timestamp", "timestamp_ntz", pa.timestamp("us")),
        ("timestamp(0)", "timestamp_ntz", pa.timestamp("us")),
        ("timestamp(3)", "timestamp_ntz", pa.timestamp("us")),
        ("timestamp_ltz", "timestamp", pa.timestamp("us", tz="UTC")),
        ("timestamp_ltz(0)", "timestamp", pa.timestamp("us", tz="UTC")),
        ("timestamp_ltz(6)", "timestamp", pa.timestamp("us", tz="UTC")),
    ],
)
def test_each_type_of_a_primary_key_table_maps_to_a_spark_and_an_arrow_type(fluss_type, spark_type, arrow_type):
    column = store_column("orders", "c", fluss_type)

    assert (column.spark_type, column.arrow_type, column.nullable) == (spark_type, arrow_type, True)


def test_not_null_is_kept():
    column = store_column("orders", "id", "bigint NOT NULL")

    assert (column.spark_type, column.nullable) == ("bigint", False)


@pytest.mark.parametrize(
    "fluss_type",
    [
        "array<int>",
        "map<string, int>",
        "row<a int>",
        "timestamp(9)",
        "timestamp_ltz(7)",
        "time",
        "time(3)",
        "varchar(3)",
    ],
)
def test_a_type_without_a_lossless_spark_type_is_refused_naming_table_and_column(fluss_type):
    with pytest.raises(SchemaMismatchError, match=r"table 'orders': column 'tags' is ") as raised:
        store_column("orders", "tags", fluss_type)

    assert raised.value.table == "orders"


def test_a_time_is_refused_because_delta_has_no_time_type():
    with pytest.raises(SchemaMismatchError, match=r"column 'opens' is time\(3\) NOT NULL: Delta Lake has no time type"):
        store_column("shops", "opens", "time(3) NOT NULL")


def test_a_timestamp_finer_than_microseconds_is_refused_saying_so():
    with pytest.raises(SchemaMismatchError, match=r"column 'at' is timestamp\(9\): Spark keeps microseconds"):
        store_column("events", "at", "timestamp(9)")
