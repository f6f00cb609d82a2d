"""The store's data files under ``remote.dir``: immutable Parquet log segments and snapshots.

Failure mode: a reader (Spark, on another machine) seeing a half-written file. Files are
written to a temporary name and renamed into place, and never modified afterwards; a file
whose metadata row was never committed (crash in between) is simply overwritten by the next
write of the same offsets. Layout (see tiering.kvstore.models for the columns)::

    <remote>/<table slug>-<table_id>/bucket-<b>/log/<start>-<end>.parquet
    <remote>/<table slug>-<table_id>/bucket-<b>/snapshots/snapshot-<id>.parquet

A bucket's live state is *derived*: its latest snapshot plus the log segments after it,
merged so the change with the highest offset per key wins and ``-D`` removes the key
(:mod:`tiering.kvstore.contract.changes`, the lake writers' merge too).
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tiering.atomic_file import replacing
from tiering.kvstore.contract.changes import apply_changes, newest_per_key
from tiering.kvstore.models import LogSegment, Snapshot, TableInfo
from tiering.kvstore.protocol import OFFSET_COLUMN, OFFSET_TYPE, OP_COLUMN, TIMESTAMP_COLUMN
from tiering.kvstore.protocol import TIMESTAMP_TYPE as TIMESTAMP
from tiering.kvstore.types import arrow_type

_UNSAFE_IN_PATH = re.compile(r"[^A-Za-z0-9_-]")


def user_schema(info: TableInfo) -> pa.Schema:
    return pa.schema([pa.field(c.name, arrow_type(c.type)) for c in info.columns])


def log_schema(info: TableInfo) -> pa.Schema:
    return (
        user_schema(info)
        .append(pa.field(OFFSET_COLUMN, OFFSET_TYPE))
        .append(pa.field(OP_COLUMN, pa.string()))
        .append(pa.field(TIMESTAMP_COLUMN, TIMESTAMP))
    )


def snapshot_schema(info: TableInfo) -> pa.Schema:
    return user_schema(info).append(pa.field(OFFSET_COLUMN, OFFSET_TYPE)).append(pa.field(TIMESTAMP_COLUMN, TIMESTAMP))


def table_dir(remote: Path, info: TableInfo) -> Path:
    """``<remote>/<slug>-<table_id>``: the id makes it unique, the slug keeps it readable.

    The slug is the name with every character outside ``[A-Za-z0-9_-]`` replaced by ``_``,
    cut to 200 characters, so no table name (tiering.kvstore.names accepts quotes, spaces,
    unicode) reaches a path: nothing to escape for a shell, a glob (Spark reads these files
    by path) or a filesystem's length limit. Names valid before the rule was widened
    (``[A-Za-z_][A-Za-z0-9_-]{0,199}``) are their own slug, so existing stores keep their layout.
    """
    slug = _UNSAFE_IN_PATH.sub("_", info.name)[:200]
    return remote / f"{slug}-{info.table_id}"


def segment_path(remote: Path, info: TableInfo, bucket: int, start: int, end: int) -> Path:
    return table_dir(remote, info) / f"bucket-{bucket:05d}" / "log" / f"{start:020d}-{end:020d}.parquet"


def snapshot_path(remote: Path, info: TableInfo, bucket: int, snapshot_id: int) -> Path:
    return table_dir(remote, info) / f"bucket-{bucket:05d}" / "snapshots" / f"snapshot-{snapshot_id:010d}.parquet"


def write_atomic(data: pa.Table, path: Path) -> int:
    """Write a Parquet file all-or-nothing; returns its size in bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as tmp:
        pq.write_table(data, tmp, compression="zstd")
    return path.stat().st_size


def live_state(info: TableInfo, base: Snapshot | None, segments: list[LogSegment]) -> pa.Table:
    """The bucket's rows (snapshot layout) after applying ``segments`` on top of ``base``."""
    schema = snapshot_schema(info)
    rows = pq.read_table(base.files, schema=schema).to_batches() if base is not None and base.files else []
    newest = None
    if segments:
        log = log_schema(info)
        newest = newest_per_key(pa.concat_tables(pq.read_table(s.file, schema=log) for s in segments), info.primary_key)
    return pa.Table.from_batches(apply_changes(rows, newest, info.primary_key, schema), schema)
