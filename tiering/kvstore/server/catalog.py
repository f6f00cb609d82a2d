"""Tables, buckets, log segments and snapshots as rows of the metadata database.

Every function runs inside a caller's transaction (``Database.tx``) so a caller can combine
them atomically, e.g. "append these segments and move the log end". A lookup of a table by
name sees only the live table of that name; a dropped table keeps its rows (its id is never
reused) until GC has deleted its files.

A refusal is raised (``ApiError``), rolling the caller's transaction back; only a ``find_*``
lookup, whose miss is an answer rather than a failure, returns None.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from typing import NamedTuple

from tiering.kvstore.models import BucketLog, LogSegment, Snapshot, TableInfo, TableSpec
from tiering.kvstore.server.errors import CONFLICT, ApiError, table_not_found

#: What ends the ETag of the logs answer that names each table's holder (``?holders=true``).
HOLDERS_TAG = "-holders"


def create_table(conn: sqlite3.Connection, spec: TableSpec) -> TableInfo:
    existing = conn.execute("SELECT table_id FROM tables WHERE name = ? AND state = 'live'", (spec.name,)).fetchone()
    if existing:
        raise ApiError(409, CONFLICT, f"table {spec.name!r} already exists (table_id {existing['table_id']})")
    cur = conn.execute("INSERT INTO tables (name, info) VALUES (?, '')", (spec.name,))
    info = TableInfo(**spec.model_dump(by_alias=True), table_id=cur.lastrowid)
    replace_info(conn, info)
    conn.executemany(
        "INSERT INTO buckets (table_id, bucket) VALUES (?, ?)", [(info.table_id, b) for b in range(spec.num_buckets)]
    )
    return info


def live_table(conn: sqlite3.Connection, name: str) -> TableInfo:
    row = conn.execute("SELECT info FROM tables WHERE name = ? AND state = 'live'", (name,)).fetchone()
    if row is None:
        raise table_not_found(name)
    return TableInfo.model_validate_json(row["info"])


def replace_info(conn: sqlite3.Connection, info: TableInfo) -> None:
    """Record a live table's new description (its schema grew)."""
    conn.execute("UPDATE tables SET info = ? WHERE table_id = ?", (info.model_dump_json(by_alias=True), info.table_id))


def live_tables(conn: sqlite3.Connection) -> list[TableInfo]:
    rows = conn.execute("SELECT info FROM tables WHERE state = 'live' ORDER BY name").fetchall()
    return [TableInfo.model_validate_json(r["info"]) for r in rows]


def catalog_tag(conn: sqlite3.Connection) -> str:
    """The live tables' list's ETag: it changes with any change to that list (db.py's triggers)."""
    row = conn.execute("SELECT store_id, version FROM catalog_version").fetchone()
    return f'"{row["store_id"]}-{row["version"]}"'


def logs_tag(conn: sqlite3.Connection, holders: bool) -> str:
    """Every live table's log ends' ETag: it changes with the list of tables and with any bucket's
    log range (db.py's triggers); the answer naming the holders has tags of its own, so neither
    answer is ever confirmed by the other's tag."""
    row = conn.execute("SELECT store_id, c.version, l.version FROM catalog_version c, logs_version l").fetchone()
    return f'"{row[0]}-{row[1]}-{row[2]}{HOLDERS_TAG if holders else ""}"'


def _named(names: list[str] | None) -> tuple[str, tuple[str, ...]]:
    """The SQL condition on ``tables`` (alias ``t``) selecting the live tables of ``names`` (None:
    every live one) and its parameter: one JSON array, however many names."""
    if names is None:
        return "t.state = 'live'", ()
    return "t.state = 'live' AND t.name IN (SELECT value FROM json_each(?))", (json.dumps(names),)


class KeptLog(NamedTuple):
    """One table's log answer as JSON, kept between calls: ``plain`` without ``lake_job`` and
    ``lake_group``, ``held`` with them (each only when its report names one), both for the table's
    ``version``."""

    version: int | None
    plain: str
    held: str


def logs_json(
    conn: sqlite3.Connection, names: list[str] | None, kept: dict[int, KeptLog], holders: bool
) -> dict[str, str]:
    """Name -> the live table's log (a NamedTableLog, with its last lake report's offsets, and
    with ``holders`` the job that made it and that job's tiering group) as JSON, in name order;
    ``names`` None: every live table. ``kept``: table id -> its answer from earlier calls,
    brought up to date here: only the tables whose version moved (db.py's triggers, in the
    transaction of the change) are read again, in one query where SQLite writes the JSON; both
    answers are kept, so asking for holders or not costs the same. At 10,000 tables, reading
    them all takes ~100 ms; listing the versions, ~10 ms. The bucket arrays follow the buckets'
    primary key (the subquery's ORDER BY reads that index; nothing sorts)."""
    where, params = _named(names)
    listed = conn.execute(
        "SELECT t.name, t.table_id, v.version FROM tables t LEFT JOIN table_logs_version v ON v.table_id = t.table_id "
        f"WHERE {where} ORDER BY t.name",  # noqa: S608 - a fixed condition
        params,
    ).fetchall()
    versions = {table_id: version for _, table_id, version in listed}
    stale = [
        table_id
        for table_id, version in versions.items()
        if version is None or kept.get(table_id, (None,))[0] != version
    ]
    for table_id, log, job, group in conn.execute(
        "SELECT t.table_id, json_object('name', t.name, 'table_id', t.table_id, 'buckets', json(("
        "  SELECT json_group_array(json_object("
        "    'bucket', bucket, 'log_start_offset', log_start_offset, 'log_end_offset', log_end_offset))"
        "  FROM (SELECT * FROM buckets b WHERE b.table_id = t.table_id ORDER BY bucket))), "
        "  'lake', json_extract(r.report, '$.buckets')), json_extract(r.report, '$.job'), "
        "  json_extract(r.report, '$.group') "
        "FROM tables t LEFT JOIN lake_reports r ON r.table_id = t.table_id "
        "WHERE t.table_id IN (SELECT value FROM json_each(?))",
        (json.dumps(stale),),
    ):
        # an object's last member added by hand: json_object ends the text with its closing brace
        named = {"lake_job": job, "lake_group": group}
        extra = "".join(f",{json.dumps(key)}:{json.dumps(value)}" for key, value in named.items() if value is not None)
        held = f"{log[:-1]}{extra}}}" if extra else log
        kept[table_id] = KeptLog(versions[table_id], log, held)
    if names is None:  # what no longer lists is dropped
        for table_id in kept.keys() - versions.keys():
            del kept[table_id]
    if holders:
        return {name: kept[table_id].held for name, table_id, _ in listed}
    return {name: kept[table_id].plain for name, table_id, _ in listed}


class TableEnds(NamedTuple):
    """What checking offsets against a live table needs, read for many tables at once without
    parsing their descriptions: its id and each bucket's ``(log_start_offset, log_end_offset)``."""

    table_id: int
    buckets: dict[int, tuple[int, int]]


def table_ends(conn: sqlite3.Connection, names: list[str]) -> dict[str, TableEnds]:
    """Name -> the live table's ends, for those of ``names`` the catalog holds (one query)."""
    where, params = _named(names)
    ends: dict[str, TableEnds] = {}
    for name, table_id, bucket, start, end in conn.execute(
        "SELECT t.name, t.table_id, b.bucket, b.log_start_offset, b.log_end_offset "
        f"FROM tables t JOIN buckets b ON b.table_id = t.table_id WHERE {where}",  # noqa: S608 - a fixed condition
        params,
    ):
        ends.setdefault(name, TableEnds(table_id, {})).buckets[bucket] = (start, end)
    return ends


def tables_to_collect(conn: sqlite3.Connection) -> list[TableInfo]:
    """Every table GC must visit: live and dropped ones, until purged."""
    rows = conn.execute("SELECT info FROM tables WHERE state != 'purged' ORDER BY table_id").fetchall()
    return [TableInfo.model_validate_json(r["info"]) for r in rows]


def table_state(conn: sqlite3.Connection, table_id: int) -> str:
    """``live``, ``dropped`` or ``purged`` (an id is never reused, so its row stays)."""
    return conn.execute("SELECT state FROM tables WHERE table_id = ?", (table_id,)).fetchone()["state"]


def set_state(conn: sqlite3.Connection, table_id: int, state: str) -> None:
    conn.execute("UPDATE tables SET state = ? WHERE table_id = ?", (state, table_id))


def bucket_logs(conn: sqlite3.Connection, table_id: int) -> list[BucketLog]:
    rows = conn.execute(
        "SELECT bucket, log_start_offset, log_end_offset FROM buckets WHERE table_id = ? ORDER BY bucket", (table_id,)
    ).fetchall()
    return [BucketLog(**dict(r)) for r in rows]


def add_segments(
    conn: sqlite3.Connection, table_id: int, segments: Iterable[tuple[int, LogSegment]], now_ms: int
) -> None:
    """Record flushed segments and move each bucket's log end to the segment's end."""
    for bucket, seg in segments:
        conn.execute(
            "INSERT OR REPLACE INTO segments VALUES (?, ?, ?, ?, ?, ?)",
            (table_id, bucket, seg.start_offset, seg.end_offset, seg.file, now_ms),
        )
        conn.execute(
            "UPDATE buckets SET log_end_offset = ? WHERE table_id = ? AND bucket = ?",
            (seg.end_offset, table_id, bucket),
        )


def segments(
    conn: sqlite3.Connection, table_id: int, bucket: int, from_offset: int, to_offset: int
) -> list[LogSegment]:
    """Segments overlapping ``[from_offset, to_offset)``, in offset order."""
    (found,) = segments_of_ranges(conn, [(table_id, bucket, from_offset, to_offset)])
    return found


def segments_of_ranges(conn: sqlite3.Connection, ranges: list[tuple[int, int, int, int]]) -> list[list[LogSegment]]:
    """For each ``(table_id, bucket, from_offset, to_offset)``, the segments overlapping
    ``[from_offset, to_offset)`` in offset order: one query for any number of ranges."""
    found: list[list[LogSegment]] = [[] for _ in ranges]
    for r in conn.execute(
        "SELECT r.key, s.start_offset, s.end_offset, s.file FROM json_each(?) r JOIN segments s "
        "ON s.table_id = r.value ->> 0 AND s.bucket = r.value ->> 1 "
        "AND s.end_offset > r.value ->> 2 AND s.start_offset < r.value ->> 3 ORDER BY r.key, s.start_offset",
        (json.dumps(ranges),),
    ):
        found[r["key"]].append(LogSegment(start_offset=r["start_offset"], end_offset=r["end_offset"], file=r["file"]))
    return found


def segment_rows(conn: sqlite3.Connection, table_id: int, bucket: int) -> list[sqlite3.Row]:
    return conn.execute(
        "SELECT start_offset, end_offset, file, created_at_ms FROM segments WHERE table_id = ? AND bucket = ? "
        "ORDER BY start_offset",
        (table_id, bucket),
    ).fetchall()


def delete_segments_below(conn: sqlite3.Connection, table_id: int, bucket: int, end_offset: int) -> None:
    """Drop segments ending at or below ``end_offset``; the log now starts there."""
    conn.execute(
        "DELETE FROM segments WHERE table_id = ? AND bucket = ? AND end_offset <= ?", (table_id, bucket, end_offset)
    )
    conn.execute(
        "UPDATE buckets SET log_start_offset = MAX(log_start_offset, ?) WHERE table_id = ? AND bucket = ?",
        (end_offset, table_id, bucket),
    )


def _snapshot(row: sqlite3.Row) -> Snapshot:
    return Snapshot(
        bucket=row["bucket"],
        snapshot_id=row["snapshot_id"],
        log_offset=row["log_offset"],
        files=json.loads(row["files"]),
        row_count=row["row_count"],
        size_bytes=row["size_bytes"],
    )


def next_snapshot_id(conn: sqlite3.Connection, table_id: int, bucket: int) -> int:
    row = conn.execute(
        "SELECT last_snapshot_id FROM buckets WHERE table_id = ? AND bucket = ?", (table_id, bucket)
    ).fetchone()
    return row["last_snapshot_id"] + 1


def add_snapshot(conn: sqlite3.Connection, table_id: int, snap: Snapshot, now_ms: int) -> None:
    conn.execute(
        "INSERT INTO snapshots VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            table_id,
            snap.bucket,
            snap.snapshot_id,
            snap.log_offset,
            json.dumps(snap.files),
            snap.row_count,
            snap.size_bytes,
            now_ms,
        ),
    )
    conn.execute(
        "UPDATE buckets SET last_snapshot_id = ? WHERE table_id = ? AND bucket = ?",
        (snap.snapshot_id, table_id, snap.bucket),
    )


def latest_snapshots(conn: sqlite3.Connection, table_id: int) -> dict[int, Snapshot]:
    rows = conn.execute(
        "SELECT s.* FROM snapshots s JOIN buckets b ON s.table_id = b.table_id AND s.bucket = b.bucket "
        "AND s.snapshot_id = b.last_snapshot_id WHERE s.table_id = ? ORDER BY s.bucket",
        (table_id,),
    ).fetchall()
    return {r["bucket"]: _snapshot(r) for r in rows}


def find_snapshot(conn: sqlite3.Connection, table_id: int, bucket: int, snapshot_id: int) -> Snapshot | None:
    """The snapshot, or None when it never existed or GC deleted it (the caller says which)."""
    row = conn.execute(
        "SELECT * FROM snapshots WHERE table_id = ? AND bucket = ? AND snapshot_id = ?", (table_id, bucket, snapshot_id)
    ).fetchone()
    return _snapshot(row) if row else None


def snapshots_of_bucket(conn: sqlite3.Connection, table_id: int, bucket: int) -> list[Snapshot]:
    """Newest first."""
    rows = conn.execute(
        "SELECT * FROM snapshots WHERE table_id = ? AND bucket = ? ORDER BY snapshot_id DESC", (table_id, bucket)
    ).fetchall()
    return [_snapshot(r) for r in rows]


def delete_snapshot(conn: sqlite3.Connection, table_id: int, bucket: int, snapshot_id: int) -> None:
    conn.execute(
        "DELETE FROM snapshots WHERE table_id = ? AND bucket = ? AND snapshot_id = ?", (table_id, bucket, snapshot_id)
    )
