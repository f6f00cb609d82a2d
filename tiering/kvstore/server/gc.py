"""The store's garbage collection: expired leases, old snapshots, used-up log segments, dropped tables.

Failure modes: deleting what someone still needs, and stalling the whole store while deleting.

- A snapshot held by an unexpired lease is never deleted, nor one of the newest
  ``num_retained`` of a live table's bucket (the newest is the store's own state).
- A log segment goes only once covered by its bucket's latest snapshot (the store rebuilds a
  bucket from snapshot + log) *and* either tiered (end <= the table's reported lake offset) or
  older than the optional hard retention cap. Segments go oldest first, so the log stays a
  contiguous range and its start moves up to the last one deleted.
- A dropped table loses everything not leased; once nothing is left, its directory goes and it
  is marked ``purged``.
- Each table is collected in a transaction of its own. The metadata database's lock is the
  store's global lock, so one transaction for every table would stop every write, snapshot and
  lease call for the whole pass; between two tables, they proceed. The table's holds, lake
  report and state are read in the transaction that deletes, so a lease acquired (or a report
  made, a table dropped) since the last table is respected. Two passes may overlap (the
  periodic one and a drop's): each table's transaction sees what the other committed.
- Files are deleted only after the transaction that deleted their rows committed. A crash or a
  failed commit in between leaves orphan files, never a row naming a deleted file: such a row
  would answer 410 for a snapshot a lease was granted on, or lose the log records a bucket's
  state is rebuilt from.
- A table whose collection fails keeps everything (its transaction rolls back); the pass goes
  on with the other tables and then raises that table's error, so the failure is not hidden.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tiering.kvstore.models import TableInfo
from tiering.kvstore.server import catalog, lake_reports, leases
from tiering.kvstore.server.db import Database
from tiering.kvstore.server.files import table_dir
from tiering.kvstore.server.metrics import StoreMetrics

log = logging.getLogger(__name__)

KINDS = ("leases", "snapshots", "segments", "tables")


@dataclass(frozen=True)
class Retention:
    """What GC keeps: ``num_retained`` newest snapshots per bucket (>= 1), and log segments
    until tiered or, when ``log_retention_s`` is set, at most that long (once snapshot-covered)."""

    num_retained: int
    log_retention_s: float | None = None

    def __post_init__(self) -> None:
        if self.num_retained < 1:
            raise ValueError(
                f"num_retained must be >= 1 (the latest snapshot is the store's own state), got {self.num_retained}"
            )

    def segment_expired(self, created_at_ms: int, now_ms: int) -> bool:
        return self.log_retention_s is not None and created_at_ms < now_ms - self.log_retention_s * 1000


@dataclass
class _Garbage:
    """What one table's transaction deleted the rows of: its files go after the commit."""

    counts: Counter[str] = field(default_factory=Counter)
    files: list[str] = field(default_factory=list)
    directory: Path | None = None


class Collector:
    """Runs GC passes over one store's metadata and files (see the module docstring)."""

    def __init__(self, db: Database, remote: Path, retention: Retention, metrics: StoreMetrics) -> None:
        self.db = db
        self.remote = remote
        self.retention = retention
        self.metrics = metrics

    def run(self, now_ms: int) -> dict[str, int]:
        """One pass; returns how many leases, snapshots, segments and tables it removed."""
        counts: Counter[str] = Counter({kind: 0 for kind in KINDS})
        with self.db.tx() as conn:
            counts["leases"] = leases.delete_expired(conn, now_ms)
            tables = catalog.tables_to_collect(conn)
        self._count(counts)  # the zeros too: every kind is exported from the first pass on
        failures = []
        for info in tables:
            try:
                counts.update(self._collect_table(info, now_ms))
            except Exception as e:
                log.warning(
                    "gc of table %s (table_id %d) failed; it keeps everything", info.name, info.table_id, exc_info=True
                )
                failures.append(e)
        if failures:
            raise failures[0]
        self.metrics.gc_runs.inc()
        if any(counts.values()):
            log.info("gc deleted %s", dict(counts))
        return dict(counts)

    def _collect_table(self, info: TableInfo, now_ms: int) -> Counter[str]:
        with self.db.tx() as conn:
            garbage = self._collect_rows(conn, info, now_ms)
        for file in garbage.files:
            Path(file).unlink(missing_ok=True)
        if garbage.directory is not None:
            shutil.rmtree(garbage.directory, ignore_errors=True)
        self._count(garbage.counts)
        return garbage.counts

    def _collect_rows(self, conn: sqlite3.Connection, info: TableInfo, now_ms: int) -> _Garbage:
        garbage = _Garbage()
        state = catalog.table_state(conn, info.table_id)
        if state == "purged":  # by an overlapping pass
            return garbage
        dropped = state == "dropped"
        held = leases.held_snapshots(conn, info.table_id, now_ms)
        lake = {} if dropped else lake_reports.offsets(conn, info.table_id)
        keep = 0 if dropped else self.retention.num_retained
        remaining = 0
        for bucket in range(info.num_buckets):
            snaps = catalog.snapshots_of_bucket(conn, info.table_id, bucket)
            remaining += min(keep, len(snaps))
            for snap in snaps[keep:]:
                if (bucket, snap.snapshot_id) in held:
                    remaining += 1
                    continue
                catalog.delete_snapshot(conn, info.table_id, bucket, snap.snapshot_id)
                garbage.files.extend(snap.files)
                garbage.counts["snapshots"] += 1
            covered = snaps[0].log_offset if snaps and not dropped else 0
            cut = None
            for seg in catalog.segment_rows(conn, info.table_id, bucket):
                if not dropped and not self._segment_collectable(seg, covered, lake.get(bucket, 0), now_ms):
                    break
                cut = seg["end_offset"]
                garbage.files.append(seg["file"])
                garbage.counts["segments"] += 1
            if cut is not None:
                catalog.delete_segments_below(conn, info.table_id, bucket, cut)
        if dropped and remaining == 0:
            catalog.set_state(conn, info.table_id, "purged")
            garbage.directory = table_dir(self.remote, info)
            garbage.counts["tables"] += 1
        return garbage

    def _segment_collectable(self, seg: sqlite3.Row, covered: int, lake_offset: int, now_ms: int) -> bool:
        if seg["end_offset"] > covered:
            return False
        return seg["end_offset"] <= lake_offset or self.retention.segment_expired(seg["created_at_ms"], now_ms)

    def _count(self, counts: Counter[str]) -> None:
        for kind, n in counts.items():
            self.metrics.gc_deleted.labels(kind).inc(n)
