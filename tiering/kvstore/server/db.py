"""The store's metadata database: SQLite in WAL mode under the data directory.

What fails without it: a kill -9 would lose leases, table ids and offsets, and a restarted
store would garbage-collect snapshots a job still holds. Every metadata change is one
transaction; data files are written *before* the rows that point at them, so a crash leaves
at worst an orphan file (overwritten by the next write of the same offsets), never a row
pointing at nothing. ``synchronous=NORMAL`` in WAL mode survives process crashes (only a
power loss may drop the last commits).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tables (
    table_id INTEGER PRIMARY KEY AUTOINCREMENT,  -- AUTOINCREMENT: ids are never reused
    name     TEXT NOT NULL,
    info     TEXT NOT NULL,                      -- TableInfo JSON
    state    TEXT NOT NULL DEFAULT 'live'        -- live | dropped | purged
);
CREATE UNIQUE INDEX IF NOT EXISTS tables_live_name ON tables(name) WHERE state = 'live';
CREATE TABLE IF NOT EXISTS buckets (
    table_id INTEGER NOT NULL, bucket INTEGER NOT NULL,
    log_start_offset INTEGER NOT NULL DEFAULT 0,
    log_end_offset   INTEGER NOT NULL DEFAULT 0,
    last_snapshot_id INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (table_id, bucket)
);
CREATE TABLE IF NOT EXISTS segments (
    table_id INTEGER NOT NULL, bucket INTEGER NOT NULL,
    start_offset INTEGER NOT NULL, end_offset INTEGER NOT NULL,
    file TEXT NOT NULL, created_at_ms INTEGER NOT NULL,
    PRIMARY KEY (table_id, bucket, start_offset)
);
CREATE TABLE IF NOT EXISTS snapshots (
    table_id INTEGER NOT NULL, bucket INTEGER NOT NULL, snapshot_id INTEGER NOT NULL,
    log_offset INTEGER NOT NULL, files TEXT NOT NULL,
    row_count INTEGER NOT NULL, size_bytes INTEGER NOT NULL, created_at_ms INTEGER NOT NULL,
    PRIMARY KEY (table_id, bucket, snapshot_id)
);
CREATE TABLE IF NOT EXISTS leases (
    lease_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL, expires_at_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS lease_holds (
    lease_id TEXT NOT NULL, table_id INTEGER NOT NULL, bucket INTEGER NOT NULL,
    snapshot_id INTEGER NOT NULL,
    PRIMARY KEY (lease_id, table_id, bucket, snapshot_id)
);
CREATE TABLE IF NOT EXISTS lake_reports (
    table_id INTEGER PRIMARY KEY, epoch INTEGER NOT NULL, report TEXT NOT NULL
);
-- The highest table epoch a tiering group's member has shown for a table (table_epochs.py).
CREATE TABLE IF NOT EXISTS table_owners (
    table_id INTEGER PRIMARY KEY, grp TEXT NOT NULL, job TEXT NOT NULL, table_epoch INTEGER NOT NULL
);
-- The live tables' list's version (the ETag of GET /v1/tables): the triggers move it on every
-- change to a live table's row, whichever code makes it; store_id is random per database, so two
-- stores (or one re-created on the same port) never answer with the same tag.
CREATE TABLE IF NOT EXISTS catalog_version (
    id INTEGER PRIMARY KEY CHECK (id = 1), store_id TEXT NOT NULL, version INTEGER NOT NULL
);
INSERT OR IGNORE INTO catalog_version VALUES (1, lower(hex(randomblob(8))), 0);
CREATE TRIGGER IF NOT EXISTS catalog_table_created AFTER INSERT ON tables
BEGIN UPDATE catalog_version SET version = version + 1; END;
CREATE TRIGGER IF NOT EXISTS catalog_table_changed AFTER UPDATE ON tables
WHEN OLD.state = 'live' OR NEW.state = 'live'  -- a dropped table's purge changes no list
BEGIN UPDATE catalog_version SET version = version + 1; END;
-- Every bucket's log range and lake report, versioned (with the catalog's version, the ETag of
-- GET /v1/logs): a write, a truncation, a new table's buckets, a lake report (or its drop) move it, so an idle
-- job's planner gets a 304.
CREATE TABLE IF NOT EXISTS logs_version (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL);
INSERT OR IGNORE INTO logs_version VALUES (1, 0);
CREATE TRIGGER IF NOT EXISTS logs_bucket_created AFTER INSERT ON buckets
BEGIN UPDATE logs_version SET version = version + 1; END;
CREATE TRIGGER IF NOT EXISTS logs_bucket_moved AFTER UPDATE OF log_start_offset, log_end_offset ON buckets
WHEN OLD.log_start_offset != NEW.log_start_offset OR OLD.log_end_offset != NEW.log_end_offset
BEGIN UPDATE logs_version SET version = version + 1; END;
CREATE TRIGGER IF NOT EXISTS logs_lake_reported AFTER INSERT ON lake_reports
BEGIN UPDATE logs_version SET version = version + 1; END;
CREATE TRIGGER IF NOT EXISTS logs_lake_report_changed AFTER UPDATE ON lake_reports
BEGIN UPDATE logs_version SET version = version + 1; END;
CREATE TRIGGER IF NOT EXISTS logs_lake_report_dropped AFTER DELETE ON lake_reports
BEGIN UPDATE logs_version SET version = version + 1; END;
-- The same, per table: GET /v1/logs keeps each table's answer and rebuilds only the tables whose
-- version moved (catalog.logs_json).
CREATE TABLE IF NOT EXISTS table_logs_version (table_id INTEGER PRIMARY KEY, version INTEGER NOT NULL);
INSERT OR IGNORE INTO table_logs_version SELECT table_id, 0 FROM tables;
CREATE TRIGGER IF NOT EXISTS table_logs_bucket_created AFTER INSERT ON buckets
BEGIN
    INSERT INTO table_logs_version VALUES (NEW.table_id, 0) ON CONFLICT (table_id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER IF NOT EXISTS table_logs_bucket_moved AFTER UPDATE OF log_start_offset, log_end_offset ON buckets
WHEN OLD.log_start_offset != NEW.log_start_offset OR OLD.log_end_offset != NEW.log_end_offset
BEGIN UPDATE table_logs_version SET version = version + 1 WHERE table_id = NEW.table_id; END;
CREATE TRIGGER IF NOT EXISTS table_logs_lake_reported AFTER INSERT ON lake_reports
BEGIN UPDATE table_logs_version SET version = version + 1 WHERE table_id = NEW.table_id; END;
CREATE TRIGGER IF NOT EXISTS table_logs_lake_report_changed AFTER UPDATE ON lake_reports
BEGIN UPDATE table_logs_version SET version = version + 1 WHERE table_id = NEW.table_id; END;
CREATE TRIGGER IF NOT EXISTS table_logs_lake_report_dropped AFTER DELETE ON lake_reports
BEGIN UPDATE table_logs_version SET version = version + 1 WHERE table_id = OLD.table_id; END;
"""


class Database:
    """One connection shared by all threads, serialized by a lock (requests are short)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._lock = threading.RLock()
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """A write transaction; the lock makes read-check-write sequences atomic."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._conn.close()
