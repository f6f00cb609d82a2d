"""Snapshot and log segment files laid out as the KV store writes them (models.py docstring)."""

from __future__ import annotations

import datetime as dt
import os
import uuid

import pyarrow as pa
import pyarrow.parquet as pq

from tiering.kvstore.contract import StoreTable

EPOCH0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def ts(offset: int) -> dt.datetime:
    """The change time of an offset: distinct per offset so tests can check it round-trips."""
    return EPOCH0 + dt.timedelta(seconds=offset)


def _schema(table: StoreTable, with_op: bool) -> pa.Schema:
    fields = [pa.field(c.name, c.arrow_type) for c in table.columns] + [pa.field("__offset", pa.int64())]
    if with_op:
        fields.append(pa.field("__op", pa.string()))
    return pa.schema(fields + [pa.field("__timestamp", pa.timestamp("us", tz="UTC"))])


def write_snapshot(directory, table: StoreTable, rows: list[tuple[dict, int]]) -> str:
    """``rows``: (user row, offset that last wrote it)."""
    schema = _schema(table, with_op=False)
    data = {c.name: [r[c.name] for r, _ in rows] for c in table.columns}
    data["__offset"] = [o for _, o in rows]
    data["__timestamp"] = [ts(o) for _, o in rows]
    return _write(directory, "snapshot", pa.table(data, schema=schema))


def write_log(directory, table: StoreTable, changes: list[tuple[int, str, dict]]) -> str:
    """``changes``: (offset, op, row); a delete's row holds only the key."""
    schema = _schema(table, with_op=True)
    data = {c.name: [row.get(c.name) for _, _, row in changes] for c in table.columns}
    data["__offset"] = [o for o, _, _ in changes]
    data["__op"] = [op for _, op, _ in changes]
    data["__timestamp"] = [ts(o) for o, _, _ in changes]
    return _write(directory, "log", pa.table(data, schema=schema))


def _write(directory, kind: str, table: pa.Table) -> str:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(str(directory), f"{kind}-{uuid.uuid4().hex}.parquet")
    pq.write_table(table, path)
    return path
