"""Is the lake equal to the store? Row by row, for one table, at the store's log end.

Failure modes it exposes rather than hides: a row lost, duplicated or stale in the lake, and
offsets that claim more (or less) than the rows hold. The store takes a snapshot now, so its
state and its offsets are those at its log end; the lake must hold exactly those rows and have
reached exactly those offsets. Used by ``tiering demo`` at the end of its run and by tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import pyarrow.parquet as pq

from tiering.delta_log.lake import Lake
from tiering.delta_log.layout import SYSTEM_COLUMNS
from tiering.kvstore.client import KvStoreClient
from tiering.kvstore.models import TableInfo

__all__ = ["TableCheck", "check_table", "compare_rows"]


@dataclass(frozen=True)
class TableCheck:
    table: str
    store_rows: int
    lake_rows: int
    missing: int
    extra: int
    different: int
    offsets_match: bool

    @property
    def equal(self) -> bool:
        return self.offsets_match and not (self.missing or self.extra or self.different)


def check_table(client: KvStoreClient, lake: Lake, info: TableInfo) -> TableCheck:
    """Compare the lake with a snapshot the store takes now (at its log end) row by row."""
    key_of = _key_function(info.primary_key)
    snapshots = client.take_snapshots(info.name).buckets
    store: dict[tuple, dict] = {}
    for snap in snapshots:
        for path in snap.files:
            for row in pq.read_table(path).to_pylist():
                store[key_of(row)] = _user(row)
    loaded = lake.load(info.name)
    position = loaded.position(info.table_id) if loaded is not None else None
    reached = position.buckets if position is not None else {}
    offsets_match = all(reached.get(s.bucket, 0) == s.log_offset for s in snapshots)
    lake_rows = loaded.to_arrow().to_pylist() if loaded is not None and position is not None else []
    return compare_rows(info.name, store, lake_rows, info.primary_key, offsets_match)


def compare_rows(
    table: str,
    store: Mapping[tuple, dict],
    lake_rows: Iterable[dict],
    primary_key: list[str],
    offsets_match: bool,
) -> TableCheck:
    """``lake_rows`` (their system columns left out) against the store's rows by primary key; a key
    the lake holds twice counts as extra."""
    key_of = _key_function(primary_key)
    rows: dict[tuple, dict] = {}
    duplicates = 0
    for row in lake_rows:
        key = key_of(row)
        duplicates += key in rows
        rows[key] = _user(row)
    return TableCheck(
        table=table,
        store_rows=len(store),
        lake_rows=len(rows) + duplicates,
        missing=len(store.keys() - rows.keys()),
        extra=len(rows.keys() - store.keys()) + duplicates,
        different=sum(1 for k in store.keys() & rows.keys() if store[k] != rows[k]),
        offsets_match=offsets_match,
    )


def _key_function(columns: list[str]) -> Callable[[dict], tuple]:
    return lambda row: tuple(row[c] for c in columns)


def _user(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in SYSTEM_COLUMNS}
