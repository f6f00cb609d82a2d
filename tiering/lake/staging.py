"""Getting Spark's output files into a Delta table directory without Delta seeing them early.

Failure modes: a crash between Spark's write and the Delta commit. Spark writes into
``<table>/_staging/<uuid>/`` (Delta readers and VACUUM ignore ``_``-prefixed directories); its
files are then renamed into ``<table>/__bucket=<b>/`` (same filesystem: a rename, no copy).
Until the commit lands they are unreferenced: a crash leaves them as orphans that a
*full* ``VACUUM`` (delta-rs ``vacuum(full=True)``) deletes after the retention period — a
plain one only removes files the log once referenced — and a failed commit deletes them at once.
Staging directories a crashed writer left behind are removed after ``STALE_STAGING_S``.
Spark names its files with a per-job UUID, so renamed files never collide.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake.transaction import AddAction

from tiering.lakestate.layout import BUCKET_COLUMN

__all__ = ["STAGING_DIR", "STALE_STAGING_S", "new_staging_dir", "move_into_table", "remove_files", "clean_stale"]

STAGING_DIR = "_staging"
STALE_STAGING_S = 24 * 3600
_PREFIX = f"{BUCKET_COLUMN}="


def new_staging_dir(table_dir: str) -> str:
    return os.path.join(table_dir, STAGING_DIR, uuid.uuid4().hex)


def move_into_table(staging: str, table_dir: str) -> list[AddAction]:
    """Rename every staged Parquet file into its bucket directory; one AddAction per file."""
    adds: list[AddAction] = []
    if not os.path.isdir(staging):
        return adds
    for part_dir in sorted(os.listdir(staging)):
        if not part_dir.startswith(_PREFIX):
            continue
        bucket = int(part_dir[len(_PREFIX):])
        target_dir = os.path.join(table_dir, part_dir)
        os.makedirs(target_dir, exist_ok=True)
        for name in sorted(os.listdir(os.path.join(staging, part_dir))):
            if not name.endswith(".parquet") or name.startswith((".", "_")):
                continue  # Spark's .crc and _SUCCESS files
            target = os.path.join(target_dir, name)
            os.rename(os.path.join(staging, part_dir, name), target)
            adds.append(_add_action(f"{part_dir}/{name}", target, bucket))
    return adds


def remove_files(table_dir: str, adds: Iterable[AddAction]) -> None:
    """Delete moved files of a commit that did not land (they are referenced by nothing)."""
    for add in adds:
        try:
            os.remove(os.path.join(table_dir, add.path))
        except FileNotFoundError:
            pass


def clean_stale(table_dir: str, max_age_s: float = STALE_STAGING_S) -> None:
    """Remove staging directories older than ``max_age_s`` (left by crashed writers)."""
    root = os.path.join(table_dir, STAGING_DIR)
    if not os.path.isdir(root):
        return
    cutoff = time.time() - max_age_s
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if os.path.getmtime(path) < cutoff:
            shutil.rmtree(path, ignore_errors=True)


def _add_action(rel_path: str, path: str, bucket: int) -> AddAction:
    stat = os.stat(path)
    return AddAction(
        path=rel_path,
        size=stat.st_size,
        partition_values={BUCKET_COLUMN: str(bucket)},
        modification_time=int(stat.st_mtime * 1000),
        data_change=True,
        stats=json.dumps(_stats(pq.read_metadata(path))),
    )


def _stats(meta: pq.FileMetaData) -> dict:
    """numRecords, plus min/max/nullCount of integer columns (exact in Parquet footers, and
    enough to skip files on ``__offset`` and integer keys); other types are left out rather
    than risk a truncated string bound that would make readers skip matching files."""
    stats: dict = {"numRecords": meta.num_rows}
    mins, maxs, nulls = {}, {}, {}
    schema = meta.schema.to_arrow_schema()
    for i, field in enumerate(schema):
        if not pa.types.is_integer(field.type) or meta.num_row_groups == 0:
            continue
        groups = [meta.row_group(g).column(i).statistics for g in range(meta.num_row_groups)]
        if any(s is None or not s.has_null_count for s in groups):
            continue
        nulls[field.name] = sum(s.null_count for s in groups)
        with_values = [s for s in groups if s.has_min_max]
        if with_values and all(s.has_min_max or s.num_values == 0 for s in groups):
            mins[field.name] = min(s.min for s in with_values)
            maxs[field.name] = max(s.max for s in with_values)
    if nulls:
        stats.update(minValues=mins, maxValues=maxs, nullCount=nulls)
    return stats
