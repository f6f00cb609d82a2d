"""Fluss column types as the lake reads them: a Spark SQL type name and an Arrow type.

Failure mode it guards against: a value silently changed on its way to the lake (a nanosecond
timestamp cut to microseconds, a zone applied twice, a nested type flattened). Every type a Fluss
primary-key table can hold maps to one Spark SQL type that keeps its values; any other (ARRAY, MAP,
ROW, a timestamp finer than Spark's microseconds) raises ``SchemaMismatchError`` naming the table
and the column, never a cast.

Types are read as pyfluss spells them (``TableInfo.get_schema().get_columns()``: ``int NOT NULL``,
``decimal(10,2)``, ``timestamp_ltz(3)``). A timestamp without a time zone is Spark's
``timestamp_ntz``; ``timestamp_ltz`` (an instant) is Spark's ``timestamp``, read as UTC. ``time`` is
Spark's ``time(6)`` (Spark 4.1's TIME; Delta has no time type yet: what the lake does with it is
the lake's). ``char(n)``, ``string``, ``binary(n)`` and ``bytes`` lose only their length bound.
"""

from __future__ import annotations

import re

import pyarrow as pa

from tiering.errors import SchemaMismatchError
from tiering.kvstore.contract import StoreColumn

__all__ = ["store_column"]

_SIMPLE: dict[str, tuple[str, pa.DataType]] = {
    "boolean": ("boolean", pa.bool_()),
    "tinyint": ("tinyint", pa.int8()),
    "smallint": ("smallint", pa.int16()),
    "int": ("int", pa.int32()),
    "integer": ("int", pa.int32()),
    "bigint": ("bigint", pa.int64()),
    "float": ("float", pa.float32()),
    "double": ("double", pa.float64()),
    "string": ("string", pa.string()),
    "bytes": ("binary", pa.binary()),
    "date": ("date", pa.date32()),
}
_CHAR = re.compile(r"^(?:char|varchar)\(\d+\)$")
_BINARY = re.compile(r"^(?:binary|varbinary)\(\d+\)$")
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
_TIMESTAMP = re.compile(r"^(timestamp|timestamp_ltz)(?:\((\d)\))?$")
_TIME = re.compile(r"^time(?:\((\d)\))?$")
_NOT_NULL = " not null"
#: the finest precision Spark keeps (microseconds)
_SPARK_PRECISION = 6


def store_column(table: str, name: str, fluss_type: str) -> StoreColumn:
    """The column ``name`` of Fluss type ``fluss_type``; ``SchemaMismatchError`` naming ``table``
    and ``name`` when it has no lossless Spark type."""
    spelled = fluss_type.strip().lower()
    nullable = not spelled.endswith(_NOT_NULL)
    base = spelled.removesuffix(_NOT_NULL).strip()
    spark, arrow = _map(base) or _unmapped(table, name, fluss_type)
    return StoreColumn(name, spark, arrow, nullable)


def _map(base: str) -> tuple[str, pa.DataType] | None:
    if base in _SIMPLE:
        return _SIMPLE[base]
    if _CHAR.match(base):
        return _SIMPLE["string"]
    if _BINARY.match(base):
        return _SIMPLE["bytes"]
    decimal = _DECIMAL.match(base)
    if decimal:
        precision, scale = int(decimal.group(1)), int(decimal.group(2))
        return (f"decimal({precision},{scale})", pa.decimal128(precision, scale)) if precision <= 38 else None
    timestamp = _TIMESTAMP.match(base)
    if timestamp and int(timestamp.group(2) or _SPARK_PRECISION) <= _SPARK_PRECISION:
        if timestamp.group(1) == "timestamp_ltz":
            return "timestamp", pa.timestamp("us", tz="UTC")
        return "timestamp_ntz", pa.timestamp("us")
    time = _TIME.match(base)
    if time and int(time.group(1) or 0) <= _SPARK_PRECISION:
        return f"time({_SPARK_PRECISION})", pa.time64("us")
    return None


def _unmapped(table: str, name: str, fluss_type: str) -> tuple[str, pa.DataType]:
    raise SchemaMismatchError(
        f"Fluss table {table!r}: column {name!r} is {fluss_type}, which has no lossless Spark type; "
        "expected boolean, tinyint..bigint, float, double, decimal(p<=38,s), char/varchar/string, "
        "binary/varbinary/bytes, date, time(p<=6), timestamp(p<=6) or timestamp_ltz(p<=6)",
        table=table,
    )
