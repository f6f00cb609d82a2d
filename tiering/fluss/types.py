"""Fluss column types as the lake reads them: a Spark SQL type name and an Arrow type.

Failure mode it guards against: a value silently changed on its way to the lake (a nanosecond
timestamp cut to microseconds, a zone applied twice, a nested type flattened), or a table that
starts tiering and fails at its first write. Every type of a Fluss primary-key table that Delta
Lake can store maps to one Spark SQL type that keeps its values; any other raises
``SchemaMismatchError`` naming the table, the column and why, never a cast: ARRAY, MAP and ROW
(Fluss 0.9.1 takes them in a primary-key table), TIME (Delta has no time type) and a timestamp
finer than Spark's microseconds.

Types are read as pyfluss spells them (``TableInfo.get_schema().get_columns()``: ``int NOT NULL``,
``decimal(38,10)``, ``char(5)``, ``timestamp_ltz(3)``). A timestamp without a time zone is Spark's
``timestamp_ntz`` (Delta TIMESTAMP_NTZ); ``timestamp_ltz`` (an instant) is Spark's ``timestamp``
(Delta TIMESTAMP), in UTC. ``char(n)`` and ``binary(n)`` lose only their length bound: Fluss keeps
a CHAR's value unpadded.
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
    "bigint": ("bigint", pa.int64()),
    "float": ("float", pa.float32()),
    "double": ("double", pa.float64()),
    "string": ("string", pa.string()),
    "bytes": ("binary", pa.binary()),
    "date": ("date", pa.date32()),
}
_CHAR = re.compile(r"^char\(\d+\)$")
_BINARY = re.compile(r"^binary\(\d+\)$")
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
_TIMESTAMP = re.compile(r"^(timestamp|timestamp_ltz)(?:\((\d)\))?$")
_TIME = re.compile(r"^time(?:\(\d\))?$")
_NOT_NULL = " not null"
#: the finest precision Spark keeps (microseconds), and Fluss's when a timestamp names none
_SPARK_PRECISION = 6
#: Delta's widest decimal
_MAX_PRECISION = 38
_EXPECTED = (
    "boolean, tinyint..bigint, float, double, decimal(p<=38,s), char(n), string, binary(n), bytes, date, "
    "timestamp(p<=6) or timestamp_ltz(p<=6)"
)


def store_column(table: str, name: str, fluss_type: str) -> StoreColumn:
    """The column ``name`` of Fluss type ``fluss_type``; ``SchemaMismatchError`` naming ``table``,
    ``name`` and why when the lake cannot keep its values."""
    spelled = fluss_type.strip().lower()
    nullable = not spelled.endswith(_NOT_NULL)
    base = spelled.removesuffix(_NOT_NULL).strip()
    mapped = _map(base)
    if isinstance(mapped, str):
        raise SchemaMismatchError(f"Fluss table {table!r}: column {name!r} is {fluss_type}: {mapped}", table=table)
    spark, arrow = mapped
    return StoreColumn(name, spark, arrow, nullable)


def _map(base: str) -> tuple[str, pa.DataType] | str:
    """The Spark SQL and Arrow types of a Fluss type, or why it has none."""
    if base in _SIMPLE:
        return _SIMPLE[base]
    if _CHAR.match(base):
        return _SIMPLE["string"]
    if _BINARY.match(base):
        return _SIMPLE["bytes"]
    decimal = _DECIMAL.match(base)
    if decimal and int(decimal.group(1)) <= _MAX_PRECISION:
        precision, scale = int(decimal.group(1)), int(decimal.group(2))
        return f"decimal({precision},{scale})", pa.decimal128(precision, scale)
    timestamp = _TIMESTAMP.match(base)
    if timestamp:
        if int(timestamp.group(2) or _SPARK_PRECISION) > _SPARK_PRECISION:
            return "Spark keeps microseconds (precision 6 at most), a finer timestamp would be cut"
        if timestamp.group(1) == "timestamp_ltz":
            return "timestamp", pa.timestamp("us", tz="UTC")
        return "timestamp_ntz", pa.timestamp("us")
    if _TIME.match(base):
        return "Delta Lake has no time type; expected " + _EXPECTED
    return "no lossless Spark type; expected " + _EXPECTED
