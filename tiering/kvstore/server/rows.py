"""Turning a write request (JSON rows or an Arrow IPC stream) into a validated Arrow table.

Failure mode: a bad value silently cast (``"12"`` into a bigint, ``1.5`` into an int) or a
misspelled column dropped would corrupt the table downstream without anyone noticing. So a
value must already have the column's type family (numbers may widen or narrow only without
loss), unknown columns are refused, primary-key values must be present and non-null, and
every refusal names the field (``rows[3].amount: expected double, got string``).

JSON encodings of non-JSON types: ``date`` and ``timestamp`` are ISO 8601 strings (a
timestamp without offset is UTC), ``decimal(p,s)`` is a string or a number, ``binary`` is
base64. An upsert's missing non-key columns are null (rows are whole rows, not patches); a
delete carries the primary-key columns only.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tiering.kvstore.models import TableInfo
from tiering.kvstore.server.errors import bad_request
from tiering.kvstore.types import arrow_type, decimal_parts

_INT_BITS = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}
_UTC_US = pa.timestamp("us", tz="UTC")
_RANGE = {  # is timestamp -> (lowest, highest) allowed value
    False: (pa.scalar(dt.date(1, 1, 1), pa.date32()), pa.scalar(dt.date(9999, 12, 31), pa.date32())),
    True: (
        pa.scalar(dt.datetime(1, 1, 1, tzinfo=dt.UTC), _UTC_US),
        pa.scalar(dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC), _UTC_US),
    ),
}
_JSON_NAMES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}


def _json_name(v: Any) -> str:
    return _JSON_NAMES.get(type(v), type(v).__name__)


def _from_json(v: Any, spark_type: str) -> Any:
    """The Python value pyarrow builds the column from; ValueError says what was expected."""
    if spark_type == "boolean":
        if isinstance(v, bool):
            return v
    elif spark_type in _INT_BITS:
        if isinstance(v, int) and not isinstance(v, bool):
            bits = _INT_BITS[spark_type]
            if not -(2 ** (bits - 1)) <= v < 2 ** (bits - 1):
                raise ValueError(f"{v} is out of range for {spark_type}")
            return v
    elif spark_type in ("float", "double"):
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            try:
                return float(v)
            except OverflowError:
                raise ValueError(f"{v} is out of range for {spark_type}") from None
    elif spark_type == "string":
        if isinstance(v, str):
            return v
    elif spark_type == "binary":
        if isinstance(v, str):
            try:
                return base64.b64decode(v, validate=True)
            except binascii.Error as e:
                raise ValueError(f"expected base64 for binary: {e}") from None
    elif spark_type == "date":
        if isinstance(v, str):
            return dt.date.fromisoformat(v)
    elif spark_type == "timestamp":
        if isinstance(v, str):
            ts = dt.datetime.fromisoformat(v)
            try:  # in UTC it must still be a year 1..9999 (Spark's range, and Python's)
                return ts.replace(tzinfo=ts.tzinfo or dt.UTC).astimezone(dt.UTC)
            except OverflowError:
                raise ValueError(f"{v!r} is out of range for timestamp (0001-01-01..9999-12-31 UTC)") from None
    elif spark_type.startswith("decimal"):
        if isinstance(v, (int, float, str)) and not isinstance(v, bool):
            try:
                number = decimal.Decimal(str(v))
            except decimal.InvalidOperation:
                raise ValueError(f"{v!r} is not a decimal number") from None
            return _fitting(number, v, spark_type)
    raise ValueError(f"expected {spark_type}, got {_json_name(v)} {v!r}"[:200])


def _fitting(number: decimal.Decimal, v: Any, spark_type: str) -> decimal.Decimal:
    """``number`` when ``decimal(p,s)`` holds it without loss; else ValueError saying which side of
    the point has too many digits (trailing zeros after it do not count)."""
    if not number.is_finite():
        raise ValueError(f"{v!r} is not a finite decimal number")
    parts = decimal_parts(spark_type)
    assert parts is not None, spark_type
    precision, scale = parts
    exponent = number.normalize().as_tuple().exponent
    after = max(0, -exponent) if isinstance(exponent, int) else 0
    before = max(0, number.adjusted() + 1) if number else 0
    if after > scale:
        raise ValueError(f"{v!r} does not fit {spark_type}: {after} digits after the point, at most {scale}")
    if before > precision - scale:
        raise ValueError(
            f"{v!r} does not fit {spark_type}: {before} digits before the point, at most {precision - scale}"
        )
    return number


def _column(info: TableInfo, name: str, values: list[Any]) -> pa.Array:
    spark_type = next(c.type for c in info.columns if c.name == name)
    converted = []
    for i, v in enumerate(values):
        try:
            converted.append(None if v is None else _from_json(v, spark_type))
        except ValueError as e:
            raise bad_request(f"rows[{i}].{name}: {e}") from None
    try:
        return pa.array(converted, type=arrow_type(spark_type))
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        for i, v in enumerate(converted):  # find the row to name it
            try:
                pa.array([v], type=arrow_type(spark_type))
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
                raise bad_request(f"rows[{i}].{name}: {values[i]!r} does not fit {spark_type}: {e}") from None
        raise


def _wanted_columns(info: TableInfo, op: str) -> list[str]:
    return list(info.primary_key) if op == "delete" else [c.name for c in info.columns]


def from_json(info: TableInfo, op: str, rows: list[dict]) -> pa.Table:
    wanted = _wanted_columns(info, op)
    allowed = set(wanted)
    for i, row in enumerate(rows):
        for key in row:
            if key not in allowed:
                why = "delete rows carry primary-key columns only" if op == "delete" else "not a column of the table"
                raise bad_request(f"rows[{i}].{key}: {why} (table {info.name!r} columns: {', '.join(wanted)})")
    data = pa.table({name: _column(info, name, [row.get(name) for row in rows]) for name in wanted})
    _check_keys(info, data)
    return data


def _family(t: pa.DataType) -> str:
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "number"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "binary"
    for name, check in (
        ("timestamp", pa.types.is_timestamp),
        ("date", pa.types.is_date),
        ("boolean", pa.types.is_boolean),
    ):
        if check(t):
            return name
    return str(t)


def _conform(name: str, column: pa.ChunkedArray, spark_type: str) -> pa.ChunkedArray:
    expected = arrow_type(spark_type)
    if pa.types.is_dictionary(column.type):
        column = pc.cast(column, column.type.value_type)
    if column.type == expected:
        return column
    if _family(column.type) != _family(expected):
        raise bad_request(f"column {name!r}: expected {spark_type}, got Arrow type {column.type}")
    try:
        return pc.cast(column, expected, safe=True)
    except pa.ArrowException as e:
        raise bad_request(f"column {name!r}: cannot convert {column.type} to {spark_type} without loss: {e}") from None


def _check_range(name: str, column: pa.ChunkedArray) -> None:
    """Dates and timestamps within Spark's (and Python's) years 1..9999: Arrow can carry any
    int64, and an out-of-range key would fail every later read of its bucket."""
    if not (pa.types.is_timestamp(column.type) or pa.types.is_date(column.type)):
        return
    low, high = _RANGE[pa.types.is_timestamp(column.type)]
    bounds = pc.min_max(column)
    if bounds["min"].is_valid and (pc.less(bounds["min"], low).as_py() or pc.greater(bounds["max"], high).as_py()):
        raise bad_request(f"column {name!r}: values must lie in 0001-01-01..9999-12-31 (UTC)")


def from_arrow(info: TableInfo, op: str, body: bytes) -> pa.Table:
    try:
        data = pa.ipc.open_stream(pa.py_buffer(body)).read_all()
        data.validate(full=True)  # offsets and lengths are the sender's word until checked
    except (pa.ArrowException, OSError) as e:
        raise bad_request(f"body: not an Arrow IPC stream: {e}") from None
    wanted = _wanted_columns(info, op)
    for name in data.column_names:
        if name not in wanted:
            why = "delete rows carry primary-key columns only" if op == "delete" else "not a column of the table"
            raise bad_request(f"column {name!r}: {why} (table {info.name!r} columns: {', '.join(wanted)})")
    types = {c.name: c.type for c in info.columns}
    columns = {}
    for name in wanted:
        if name in data.column_names:
            columns[name] = _conform(name, data.column(name), types[name])
            _check_range(name, columns[name])
        elif name in info.primary_key:
            raise bad_request(f"column {name!r}: primary-key column is missing")
        else:
            columns[name] = pa.nulls(data.num_rows, arrow_type(types[name]))
    result = pa.table(columns)
    _check_keys(info, result)
    return result


def _check_keys(info: TableInfo, data: pa.Table) -> None:
    for key in info.primary_key:
        column = data.column(key)
        if column.null_count:
            index = pc.index(pc.is_null(column), True).as_py()
            raise bad_request(f"rows[{index}].{key}: primary-key column must not be null")
