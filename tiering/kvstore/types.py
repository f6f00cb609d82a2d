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

#: How a JSON row (the store's HTTP API) writes a value of each type; null is null for every type.
JSON_ENCODINGS: dict[str, str] = {
    "boolean": "`true` or `false`",
    "tinyint": "an integer, -128..127",
    "smallint": "an integer, -32768..32767",
    "int": "an integer, 32-bit",
    "bigint": "an integer, 64-bit",
    "float": "a number (stored as a 32-bit float)",
    "double": "a number",
    "string": "a string",
    "binary": "a base64 string",
    "date": 'an ISO 8601 date, `"2026-11-28"`',
    "timestamp": 'an ISO 8601 date-time, `"2026-11-28T21:30:00.5+01:00"`; without an offset it is UTC; '
    "kept in microseconds, in UTC, years 1..9999",
    "decimal(p,s)": 'a string (`"12.50"`: exact) or a number (read through its shortest decimal text); at most '
    "p-s digits before the point and s after it, p 1..38",
}


def aliases(spark_type: str) -> tuple[str, ...]:
    """The other names the protocol takes for ``spark_type`` (``long`` for ``bigint``)."""
    return tuple(alias for alias, name in _ALIASES.items() if name == spark_type)


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


def decimal_parts(spark_type: str) -> tuple[int, int] | None:
    """``(precision, scale)`` of a decimal type, None for any other type."""
    decimal = _DECIMAL.match(normalize_type(spark_type))
    return None if decimal is None else (int(decimal.group(1)), int(decimal.group(2)))


def arrow_type(spark_type: str) -> pa.DataType:
    """The Arrow type a column of this Spark SQL type is stored as in Parquet files."""
    t = normalize_type(spark_type)
    if t in _SIMPLE:
        return _SIMPLE[t]
    parts = decimal_parts(t)
    if parts is None:  # normalize_type accepts only the simple types and decimals
        raise ValueError(f"no Arrow type for Spark type {spark_type!r}")
    return pa.decimal128(*parts)
