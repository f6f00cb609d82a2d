"""The reference store's operations: what each endpoint does, independent of HTTP.

Failure modes handled here: a crash between writing a file and recording it (files first,
metadata after, so a restart sees the old consistent state); two writers interleaving offsets
of one table (a lock per table serializes its writes and snapshots, while lease calls, which
only touch metadata, never wait behind a large write); GC racing a snapshot build (GC never
deletes a bucket's latest snapshot, nor log segments it does not cover, and builds only read
those; what GC keeps and in which order it deletes: gc.py). A refusal is raised as
``ApiError`` (errors.py), from here and from the metadata modules alike.

Deleting an absent key is a no-op: no ``-D`` record is written, so every ``-D`` in the log
removes a key that existed. An upsert of a key absent from the bucket is ``+I``, else ``+U``.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

from tiering.kvstore.bucketing import rows_by_bucket
from tiering.kvstore.models import (
    AcquireRequest,
    AcquireResult,
    AddColumnRequest,
    BucketSegments,
    LakeReport,
    Lease,
    LogRange,
    LogSegment,
    ReleaseRequest,
    RenewRequest,
    Snapshot,
    SnapshotRef,
    TableInfo,
    TableLog,
    TableSnapshots,
    TableSpec,
    WriteResult,
)
from tiering.kvstore.names import duplicate_names
from tiering.kvstore.protocol import DELETE, INSERT, UPDATE
from tiering.kvstore.server import catalog, lake_reports, leases
from tiering.kvstore.server.db import Database
from tiering.kvstore.server.errors import (
    LOG_TRUNCATED,
    NOT_FOUND,
    SNAPSHOT_GONE,
    ApiError,
    bad_request,
    table_not_found,
)
from tiering.kvstore.server.files import (
    TIMESTAMP,
    live_state,
    log_schema,
    segment_path,
    snapshot_path,
    write_atomic,
)
from tiering.kvstore.server.gc import Collector, Retention
from tiering.kvstore.server.metrics import StoreMetrics

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Store:
    def __init__(self, data_dir: Path, num_retained: int = 2, log_retention_s: float | None = None) -> None:
        retention = Retention(num_retained, log_retention_s)
        self.data_dir = data_dir
        self.remote = data_dir / "remote"
        self.db = Database(data_dir / "meta.sqlite")
        self.metrics = StoreMetrics(leases_held=self._count_leases)
        self._collector = Collector(self.db, self.remote, retention, self.metrics)
        self._guard = threading.Lock()
        self._table_locks: dict[int, threading.Lock] = {}
        self._live: dict[tuple[int, int], set[Any]] = {}  # keys present per bucket; rebuilt lazily after restart
        self._logs: dict[int, catalog.KeptLog] = {}  # each table's log answers, kept (catalog.logs_json); under db.tx()

    def close(self) -> None:
        self.db.close()

    # tables

    def create_table(self, spec: TableSpec) -> TableInfo:
        with self.db.tx() as conn:
            info = catalog.create_table(conn, spec)
        log.info("created table %s (table_id %d, %d buckets)", info.name, info.table_id, info.num_buckets)
        return info

    def list_tables(self) -> list[TableInfo]:
        with self.db.tx() as conn:
            return catalog.live_tables(conn)

    def catalog_tag(self) -> str:
        """The ETag of ``list_tables()``'s answer: equal tags, equal lists."""
        with self.db.tx() as conn:
            return catalog.catalog_tag(conn)

    def tagged_tables(self) -> tuple[str, list[TableInfo]]:
        """``list_tables()`` and its ETag, read together."""
        with self.db.tx() as conn:
            return catalog.catalog_tag(conn), catalog.live_tables(conn)

    def get_table(self, name: str) -> TableInfo:
        with self.db.tx() as conn:
            return catalog.live_table(conn, name)

    def drop_table(self, name: str) -> TableInfo:
        info = self.get_table(name)
        with self._lock(info.table_id):
            with self.db.tx() as conn:
                info = catalog.live_table(conn, name)
                catalog.set_state(conn, info.table_id, "dropped")
            for key in [k for k in list(self._live) if k[0] == info.table_id]:
                del self._live[key]
        log.info("dropped table %s (table_id %d)", name, info.table_id)
        self.gc()
        return info

    def add_column(self, name: str, column: AddColumnRequest) -> TableInfo:
        """Append a nullable column. Files written before keep their schema (reading them with
        the grown schema gives null), so nothing is rewritten; the table lock orders the change
        against writes and snapshots, which take the schema under the same lock."""
        table_id = self.get_table(name).table_id
        with self._lock(table_id):
            info = self._locked_table(name, table_id)
            names = [c.name for c in info.columns]
            if duplicate_names([*names, column.name]):
                raise bad_request(
                    f"name: table {name!r} already has a column {column.name!r} (columns: {names}; "
                    "Spark compares names case-insensitively)"
                )
            described = info.model_dump(by_alias=True)
            grown = TableInfo.model_validate(
                {**described, "schema": [*described["schema"], {"name": column.name, "type": column.type}]}
            )
            with self.db.tx() as conn:
                catalog.replace_info(conn, grown)
        log.info("table %s (table_id %d): added column %s %s", name, table_id, column.name, column.type)
        return grown

    def _lock(self, table_id: int) -> threading.Lock:
        with self._guard:
            return self._table_locks.setdefault(table_id, threading.Lock())

    def _locked_table(self, name: str, table_id: int) -> TableInfo:
        """The table again under its lock: it may have been dropped (or re-created) meanwhile."""
        info = self.get_table(name)
        if info.table_id != table_id:
            raise ApiError(404, "TABLE_NOT_FOUND", f"table {name!r} was dropped while the request waited")
        return info

    # rows

    def write_rows(self, name: str, op: str, data: pa.Table) -> WriteResult:
        """Append one immutable log segment per touched bucket; offsets are dense per bucket."""
        table_id = self.get_table(name).table_id
        with self._lock(table_id):
            info = self._locked_table(name, table_id)
            with self.db.tx() as conn:
                ends = {b.bucket: b.log_end_offset for b in catalog.bucket_logs(conn, table_id)}
            keys, groups = _keys_and_buckets(info, data)
            now = dt.datetime.now(dt.UTC)
            written = []
            for bucket in sorted(groups):
                live = self._live_keys(info, bucket)
                rows, ops, added, removed = _changes(op, groups[bucket], keys, live)
                if not rows:
                    continue
                start = ends[bucket]
                seg = LogSegment(
                    start_offset=start,
                    end_offset=start + len(rows),
                    file=str(segment_path(self.remote, info, bucket, start, start + len(rows))),
                )
                write_atomic(_log_records(info, data.take(pa.array(rows, pa.int64())), start, ops, now), Path(seg.file))
                written.append((bucket, seg, added, removed))
            with self.db.tx() as conn:
                catalog.add_segments(conn, table_id, [(b, s) for b, s, _, _ in written], _now_ms())
            for bucket, _, added, removed in written:
                self._live[(table_id, bucket)] |= added
                self._live[(table_id, bucket)] -= removed
        records = sum(s.end_offset - s.start_offset for _, s, _, _ in written)
        self.metrics.rows_written.labels(name).inc(records)
        return WriteResult(
            table_id=table_id,
            rows=data.num_rows,
            records=records,
            buckets={str(b): [s.start_offset, s.end_offset] for b, s, _, _ in written},
        )

    def _live_keys(self, info: TableInfo, bucket: int) -> set[Any]:
        key = (info.table_id, bucket)
        if key not in self._live:
            state, _ = self._state(info, bucket)
            pk = list(info.primary_key)
            columns = [state.column(c).to_pylist() for c in pk]
            self._live[key] = set(columns[0] if len(pk) == 1 else zip(*columns, strict=True))
        return self._live[key]

    def _state(self, info: TableInfo, bucket: int) -> tuple[pa.Table, int]:
        """The bucket's live rows and the exclusive log offset they reflect."""
        with self.db.tx() as conn:
            snaps = catalog.snapshots_of_bucket(conn, info.table_id, bucket)
            base = snaps[0] if snaps else None
            end = catalog.bucket_logs(conn, info.table_id)[bucket].log_end_offset
            segs = catalog.segments(conn, info.table_id, bucket, base.log_offset if base else 0, end)
        return live_state(info, base, segs), end

    # snapshots

    def take_snapshots(self, name: str, only_changed: bool = False) -> TableSnapshots:
        """Snapshot every bucket now (or only those whose log moved since their last snapshot)."""
        table_id = self.get_table(name).table_id
        with self._lock(table_id):
            info = self._locked_table(name, table_id)
            with self.db.tx() as conn:
                logs = catalog.bucket_logs(conn, table_id)
                latest = catalog.latest_snapshots(conn, table_id)
            for bucket_log in logs:
                bucket = bucket_log.bucket
                base_offset = latest[bucket].log_offset if bucket in latest else 0
                if only_changed and bucket_log.log_end_offset == base_offset:
                    continue
                state, end = self._state(info, bucket)
                with self.db.tx() as conn:
                    snapshot_id = catalog.next_snapshot_id(conn, table_id, bucket)
                path = snapshot_path(self.remote, info, bucket, snapshot_id)
                size = write_atomic(state, path)
                snap = Snapshot(
                    bucket=bucket,
                    snapshot_id=snapshot_id,
                    log_offset=end,
                    files=[str(path)],
                    row_count=state.num_rows,
                    size_bytes=size,
                )
                with self.db.tx() as conn:
                    catalog.add_snapshot(conn, table_id, snap, _now_ms())
                self.metrics.snapshots_taken.labels(name).inc()
        return self.latest_snapshots(name)

    def snapshot_changed_tables(self) -> None:
        """The periodic snapshot pass: only buckets that changed since their last snapshot."""
        for info in self.list_tables():
            try:
                self.take_snapshots(info.name, only_changed=True)
            except ApiError as e:  # dropped meanwhile
                log.info("periodic snapshot of %s skipped: %s", info.name, e.message)

    def latest_snapshots(self, name: str) -> TableSnapshots:
        with self.db.tx() as conn:
            info = catalog.live_table(conn, name)
            latest = catalog.latest_snapshots(conn, info.table_id)
        return TableSnapshots(table_id=info.table_id, buckets=list(latest.values()))

    def get_snapshot(self, name: str, bucket: int, snapshot_id: int) -> Snapshot:
        with self.db.tx() as conn:
            info = catalog.live_table(conn, name)
            _check_bucket(name, info.num_buckets, bucket)
            snap = catalog.find_snapshot(conn, info.table_id, bucket, snapshot_id)
            last_id = catalog.next_snapshot_id(conn, info.table_id, bucket) - 1
        where = f"snapshot {snapshot_id} of table {name!r} bucket {bucket}"
        if snap is None and 1 <= snapshot_id <= last_id:
            raise ApiError(410, SNAPSHOT_GONE, f"{where} was deleted by GC (not leased, not among the newest)")
        if snap is None:
            raise ApiError(404, NOT_FOUND, f"{where} does not exist (latest is {last_id})")
        if not all(Path(f).exists() for f in snap.files):
            raise ApiError(410, SNAPSHOT_GONE, f"{where}: its files are gone")
        return snap

    # log

    def log_info(self, name: str) -> TableLog:
        with self.db.tx() as conn:
            info = catalog.live_table(conn, name)
            return TableLog(table_id=info.table_id, buckets=catalog.bucket_logs(conn, info.table_id))

    def logs_tag(self, holders: bool = False) -> str:
        """The ETag of ``logs_json(None, holders)``'s answer: equal tags, equal answers."""
        with self.db.tx() as conn:
            return catalog.logs_tag(conn, holders)

    def tagged_logs_json(self, holders: bool = False) -> tuple[str, str]:
        """``logs_json(None, holders)`` and its ETag, read together."""
        with self.db.tx() as conn:
            return catalog.logs_tag(conn, holders), self._logs_json(conn, None, holders)

    def logs_json(self, names: list[str] | None, holders: bool = False) -> str:
        """The ``TablesLog`` of ``names`` (None: every table), serialized: one query builds it
        (catalog.logs_json), where models would cost more than the rest of the call together.
        ``holders``: each entry names the job holding its lake report (``lake_job``), which a
        client of a release before it would refuse: only a client that asks gets it."""
        with self.db.tx() as conn:
            return self._logs_json(conn, names, holders)

    def _logs_json(self, conn: sqlite3.Connection, names: list[str] | None, holders: bool) -> str:
        found = catalog.logs_json(conn, names, self._logs, holders)
        missing = [] if names is None else [name for name in dict.fromkeys(names) if name not in found]
        return f'{{"tables":[{",".join(found.values())}],"missing":{json.dumps(missing)}}}'

    def log_segments(self, name: str, bucket: int, from_offset: int, to_offset: int) -> list[LogSegment]:
        (found,) = self.table_segments(name, [LogRange(bucket=bucket, from_offset=from_offset, to_offset=to_offset)])
        return found.segments

    def table_segments(self, name: str, ranges: list[LogRange]) -> list[BucketSegments]:
        """The segments of every range, read in one transaction (one consistent view)."""
        (found,) = self.tables_segments([(name, ranges)])
        if isinstance(found, ApiError):
            raise found
        return found

    def tables_segments(self, requests: list[tuple[str, list[LogRange]]]) -> list[list[BucketSegments] | ApiError]:
        """Per ``(table name, ranges)``, what ``table_segments`` answers or its refusal, all read in
        one transaction with three queries whatever the number of tables."""
        with self.db.tx() as conn:
            tables = catalog.table_ends(conn, [name for name, _ in requests])
            planned: list[list[tuple[int, int, int, int]] | ApiError] = []
            for name, ranges in requests:
                try:
                    planned.append(_plan_ranges(name, ranges, tables.get(name)))
                except ApiError as refusal:
                    planned.append(refusal)
            wanted = [r for plan in planned if isinstance(plan, list) for r in plan]
            found = iter(catalog.segments_of_ranges(conn, wanted))
        return [
            plan if isinstance(plan, ApiError) else [BucketSegments(bucket=r[1], segments=next(found)) for r in plan]
            for plan in planned
        ]

    # leases

    def acquire_lease(self, lease_id: str, req: AcquireRequest) -> AcquireResult:
        with self.db.tx() as conn:

            def available(ref: SnapshotRef) -> bool:
                snap = catalog.find_snapshot(conn, ref.table_id, ref.bucket, ref.snapshot_id)
                return snap is not None and all(Path(f).exists() for f in snap.files)

            return leases.acquire(conn, lease_id, req, _now_ms(), available)

    @contextmanager
    def _lease_tx(self, lease_id: str) -> Iterator[tuple[sqlite3.Connection, int]]:
        """The transaction of a call on an existing lease, after one of its own that ends the
        lease if it expired (its holds go, its epoch stays): that end stays when the call is then
        refused and rolls back."""
        now = _now_ms()
        with self.db.tx() as conn:
            leases.forget_if_expired(conn, lease_id, now)
        with self.db.tx() as conn:
            yield conn, now

    def renew_lease(self, lease_id: str, req: RenewRequest) -> Lease:
        with self._lease_tx(lease_id) as (conn, now):
            return leases.renew(conn, lease_id, req, now)

    def release_lease(self, lease_id: str, req: ReleaseRequest) -> Lease:
        with self._lease_tx(lease_id) as (conn, now):
            return leases.release(conn, lease_id, req, now)

    def drop_lease(self, lease_id: str, epoch: int) -> None:
        with self._lease_tx(lease_id) as (conn, now):
            leases.drop(conn, lease_id, epoch, now)

    def get_lease(self, lease_id: str) -> Lease:
        with self._lease_tx(lease_id) as (conn, now):
            return leases.get(conn, lease_id, now)

    def list_leases(self) -> list[Lease]:
        with self.db.tx() as conn:
            return leases.list_all(conn, _now_ms())

    def _count_leases(self) -> float:
        with self.db.tx() as conn:
            return leases.count_unexpired(conn, _now_ms())

    # lake

    def put_lake(self, name: str, report: LakeReport) -> LakeReport:
        """Store ``report``; returns it as stored (one naming no job is stored as the holder's)."""
        (answer,) = self.put_lakes([(name, report)])
        if isinstance(answer, ApiError):
            raise answer
        return answer

    def put_lakes(self, reports: list[tuple[str, LakeReport]]) -> list[LakeReport | ApiError]:
        """Store every ``(table name, report)`` in one transaction; per report what was stored, or
        its refusal. A stale epoch in any is raised and stores none (lake_reports.put_many)."""
        with self.db.tx() as conn:
            return lake_reports.put_many(conn, catalog.table_ends(conn, [name for name, _ in reports]), reports)

    def get_lake(self, name: str) -> LakeReport:
        with self.db.tx() as conn:
            return lake_reports.get(conn, catalog.live_table(conn, name))

    def drop_lake(self, name: str, expected: lake_reports.ReportVersion | None = None) -> LakeReport:
        """Forget the table's lake report (the hand-over of a table to another job), only the one
        ``expected`` names if given; returns it."""
        with self.db.tx() as conn:
            return lake_reports.drop(conn, catalog.live_table(conn, name), expected)

    # garbage collection

    def gc(self) -> dict[str, int]:
        """One GC pass (gc.py), table by table; returns how many leases, snapshots, segments
        and tables it removed."""
        return self._collector.run(_now_ms())


def _check_bucket(name: str, num_buckets: int, bucket: int) -> None:
    if not 0 <= bucket < num_buckets:
        raise ApiError(404, NOT_FOUND, f"table {name!r} has no bucket {bucket} (0..{num_buckets - 1})")


def _plan_ranges(name: str, ranges: list[LogRange], table: catalog.TableEnds | None) -> list[tuple[int, int, int, int]]:
    """``ranges`` as ``(table_id, bucket, from, to)`` to look segments up with, ``to`` cut at the
    log's end; refused, in this order, for an inverted range, an unknown table or bucket, a
    range starting below the log's start (GC deleted those offsets)."""
    for r in ranges:
        if r.to_offset < r.from_offset:
            raise bad_request(f"from/to: need 0 <= from <= to, got from={r.from_offset} to={r.to_offset}")
    if table is None:
        raise table_not_found(name)
    planned = []
    for r in ranges:
        _check_bucket(name, len(table.buckets), r.bucket)
        start, end = table.buckets[r.bucket]
        if r.from_offset < start:
            raise ApiError(
                410,
                LOG_TRUNCATED,
                f"table {name!r} bucket {r.bucket}: log starts at {start}, offsets "
                f"from {r.from_offset} were deleted; bootstrap from the latest snapshot",
            )
        planned.append((table.table_id, r.bucket, r.from_offset, min(r.to_offset, end)))
    return planned


def _keys_and_buckets(info: TableInfo, data: pa.Table) -> tuple[list[Any], dict[int, list[int]]]:
    """Each row's key identity and the row indices per bucket (bucketing.bucket_of)."""
    return rows_by_bucket(data, info.primary_key, info.num_buckets)


def _changes(op: str, rows: list[int], keys: list[Any], live: set[Any]) -> tuple[list[int], list[str], set, set]:
    """Which rows become records, their ops, and the keys added/removed (applied after commit)."""
    ops: list[str] = []
    added: set[Any] = set()
    removed: set[Any] = set()
    if op == "upsert":
        for i in rows:
            k = keys[i]
            if k in live or k in added:
                ops.append(UPDATE)
            else:
                added.add(k)
                ops.append(INSERT)
        return rows, ops, added, removed
    kept = []
    for i in rows:
        k = keys[i]
        if k in live and k not in removed:
            removed.add(k)
            kept.append(i)
            ops.append(DELETE)
    return kept, ops, added, removed


def _log_records(info: TableInfo, rows: pa.Table, start: int, ops: list[str], now: dt.datetime) -> pa.Table:
    schema = log_schema(info)
    n = rows.num_rows
    columns = [
        rows.column(f.name) if f.name in rows.column_names else pa.nulls(n, f.type)
        for f in schema
        if not f.name.startswith("__")
    ]
    columns += [
        pa.array(range(start, start + n), pa.int64()),
        pa.array(ops, pa.string()),
        pa.repeat(pa.scalar(now, TIMESTAMP), n),
    ]
    return pa.Table.from_arrays(columns, schema=schema)
