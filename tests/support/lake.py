"""What a lake holds beside its rows: who committed what, files nothing will delete, the feed.

- :func:`tiering_commits`: the epoch, round and lease of every tiering commit of a table, read
  from its Delta history (a driver is judged by its effects, not its logs);
- :func:`assert_no_orphans`: every file under a table directory (outside ``_delta_log`` and
  ``_staging``) is either active in the Delta table or listed by a ``VACUUM`` dry run with zero
  retention, so a crash leaves nothing that stays forever;
- :func:`read_feed` / :func:`replayed`: the change data feed read back as a consumer would (with
  Delta's jars in the run, Spark's ``readChangeFeed`` must read the same changes);
- :func:`codecs` / :func:`file_codecs`: the Parquet codecs a file's column chunks were written with;
- :func:`delta_rows`: a Delta table's rows, read as the job reads them (not through delta-rs's
  Python file objects, after which a process aborts at exit now and then).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from tests.support.delta_spark import delta_reader
from tests.support.oracle import TableOracle
from tiering.delta_log.commits import tiering_entry
from tiering.delta_log.lake import Lake, table_rows
from tiering.objectstore.object_store import ObjectStore

FEED_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


@dataclass(frozen=True)
class Commit:
    """One tiering commit of a table: its Delta version and the term and round that wrote it."""

    version: int
    epoch: int
    round: int
    lease_id: str


def tiering_commits(lake: Lake | Path, table: str) -> list[Commit]:
    """Every tiering commit of ``table``, oldest first (none before the table exists); ``lake``
    is a :class:`Lake` (any storage) or a local root."""
    loaded = (lake if isinstance(lake, Lake) else Lake.at(str(lake))).load(table)
    if loaded is None:
        return []
    commits = []
    for entry in loaded.dt.history():
        meta = tiering_entry(entry)
        if meta is None:
            continue
        meta = json.loads(meta) if isinstance(meta, str) else meta
        commits.append(Commit(entry["version"], meta["epoch"], meta["round"], meta["lease_id"]))
    return sorted(commits, key=lambda c: c.version)


def delta_rows(table: DeltaTable | str | Path) -> pa.Table:
    """Every row of the Delta table (``table`` or at local path ``table``), read through pyarrow's
    own filesystem as :func:`tiering.delta_log.lake.table_rows` reads it."""
    dt = table if isinstance(table, DeltaTable) else DeltaTable(str(table))
    return table_rows(dt, ObjectStore.of(dt.table_uri), dt.table_uri)


def files_outside_the_log(table_dir: Path) -> set[str]:
    found = set()
    for root, dirs, files in os.walk(table_dir):
        dirs[:] = [d for d in dirs if d not in ("_delta_log", "_staging")]
        found.update(os.path.realpath(os.path.join(root, f)) for f in files)
    return found


def _as_path(uri: str, table_dir: Path) -> str:
    if uri.startswith("file://"):
        uri = uri[len("file://") :]
    return os.path.realpath(uri if os.path.isabs(uri) else os.path.join(table_dir, uri))


def orphans(table_dir: Path) -> tuple[set[str], set[str]]:
    """``(unreferenced, not_vacuumable)``: files no active add action references, and those of
    them a zero-retention VACUUM dry run (full mode: it also lists never-committed files) would
    not delete."""
    dt = DeltaTable(str(table_dir))
    active = {_as_path(u, table_dir) for u in dt.file_uris()}
    unreferenced = files_outside_the_log(table_dir) - active
    vacuumable = {
        _as_path(p, table_dir)
        for p in dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=True, full=True)
    }
    return unreferenced, unreferenced - vacuumable


def assert_no_orphans(lake_root: Path, tables: Iterable[TableOracle]) -> None:
    for table in tables:
        table_dir = lake_root / table.name
        if not (table_dir / "_delta_log").exists():
            continue
        _, stuck = orphans(table_dir)
        assert not stuck, f"{table.name}: {len(stuck)} files neither active nor vacuumable: {sorted(stuck)[:5]}"


def codecs(meta: pq.FileMetaData) -> set[str]:
    """The codecs of every column chunk of a Parquet file (as pyarrow names them: LZ4 is LZ4_RAW)."""
    return {
        meta.row_group(g).column(c).compression for g in range(meta.num_row_groups) for c in range(meta.num_columns)
    }


def file_codecs(lake: Lake | Path, table: str, paths: Iterable[str]) -> set[str]:
    """The codecs of ``table``'s files ``paths`` (relative to the table, as its log names them)."""
    lake = lake if isinstance(lake, Lake) else Lake.at(str(lake))
    found: set[str] = set()
    for path in paths:
        with lake.store.filesystem.open_input_file(lake.store.path(f"{lake.path(table)}/{path}")) as f:
            found |= codecs(pq.read_metadata(f))
    return found


def read_feed(lake: Lake, table: str, start: int, end: int | None = None) -> list[dict]:
    """The feed of versions ``[start, end]`` (to the newest without ``end``), read by delta-rs;
    in a run with Delta's jars, Spark's ``readChangeFeed`` reads the same changes."""
    dt = lake.load(table).dt
    changes = pa.table(dt.load_cdf(starting_version=start, ending_version=end).read_all()).to_pylist()
    reader = delta_reader(lake)
    if reader is not None:
        spark, rs = _as_set(reader.feed(lake, table, start, end)), _as_set(changes)
        assert spark == rs, (
            f"{table}: Spark's change feed of versions {start}..{end} differs from delta-rs's: {len(spark)} changes "
            f"against {len(rs)}, only Spark's {[c for c in spark if c not in rs][:3]}, only delta-rs's "
            f"{[c for c in rs if c not in spark][:3]}"
        )
    return changes


def _as_set(changes: list[dict]) -> list[tuple]:
    """Changes comparable across readers: sorted, without the commit time (each reader types it its
    own way), a timestamp as its UTC time (each reader names UTC its own way)."""

    def value(v):
        return v.astimezone(dt.UTC).isoformat() if isinstance(v, dt.datetime) else repr(v)

    return sorted(tuple(sorted((k, value(v)) for k, v in c.items() if k != "_commit_timestamp")) for c in changes)


def replayed(changes: list[dict], key: str = "id") -> dict[object, dict]:
    """The rows an empty table ends with when ``changes`` are applied version by version; a
    delete or a pre-image must match the row it replaces."""
    rows: dict[object, dict] = {}
    for change in sorted(changes, key=lambda c: (c["_commit_version"], c["_change_type"] != "delete")):
        row = {k: v for k, v in change.items() if k not in FEED_COLUMNS}
        if change["_change_type"] == "delete":
            assert rows.pop(row[key]) == row
        elif change["_change_type"] == "update_preimage":
            assert rows[row[key]] == row
        else:
            rows[row[key]] = row
    return rows
