"""Column types of the KV store protocol: Spark SQL type names and their Arrow equivalents.

The protocol names types the way Spark SQL does (``bigint``, ``decimal(10,2)``) so a table's
schema reads the same in the store, in Spark and in Delta. Only these types are accepted;
anything else is a clear error naming the column, never a silent cast.
"""

from __future__ import annotations

import re

import pyarrow as pa

_SIMPLE: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "tinyint": pa.int8(),
    "smallint": pa.int16(),
    "int": pa.int32(),
    "bigint": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
}
_ALIASES = {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint"}
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")

SUPPORTED_TYPES = tuple(_SIMPLE) + ("decimal(p,s)",)


def normalize_type(spark_type: str) -> str:
    """The canonical spelling of a supported type; ValueError naming the supported ones."""
    t = spark_type.strip().lower()
    t = _ALIASES.get(t, t)
    if t in _SIMPLE:
        return t
    m = _DECIMAL.match(t)
    if m and 1 <= int(m.group(1)) <= 38 and int(m.group(2)) <= int(m.group(1)):
        return f"decimal({int(m.group(1))},{int(m.group(2))})"
    raise ValueError(f"unsupported type {spark_type!r}; expected one of {', '.join(SUPPORTED_TYPES)}")


def arrow_type(spark_type: str) -> pa.DataType:
    """The Arrow type a column of this Spark SQL type is stored as in Parquet files."""
    t = normalize_type(spark_type)
    if t in _SIMPLE:
        return _SIMPLE[t]
    decimal = _DECIMAL.match(t)
    if decimal is None:  # normalize_type accepts only the simple types and decimals
        raise ValueError(f"no Arrow type for Spark type {spark_type!r}")
    precision, scale = decimal.groups()
    return pa.decimal128(int(precision), int(scale))
