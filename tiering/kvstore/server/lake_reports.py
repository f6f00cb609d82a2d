"""Lake reports: the log offset per bucket a tiering job has committed to the lake.

Failure modes: a zombie driver (an old leadership term) reporting after a newer leader took
over — the table's report remembers the highest epoch seen and a lower one is refused with
409 ``FENCED_EPOCH``; a report for a dropped-and-re-created table (its ``table_id`` names the
old one) — refused with 409 ``CONFLICT``; an offset the bucket never reached — 400. A wrong
report would let GC delete log segments the lake does not hold yet.

Functions run inside a caller's transaction (``Database.tx``), like catalog.py's, and raise
``ApiError`` on refusal.
"""

from __future__ import annotations

import sqlite3

from tiering.kvstore.models import BucketLog, LakeReport, TableInfo
from tiering.kvstore.server.errors import CONFLICT, NOT_FOUND, ApiError, bad_request, fenced


def put(conn: sqlite3.Connection, table: TableInfo, logs: list[BucketLog], report: LakeReport) -> LakeReport:
    """Store the lake position a job reached; refuses stale epochs and impossible offsets."""
    if report.table_id != table.table_id:
        raise ApiError(
            409, CONFLICT,
            f"lake report for table {table.name!r} names table_id {report.table_id}, but the table's id is "
            f"{table.table_id} (it was dropped and re-created)",
        )
    ends = {log.bucket: log.log_end_offset for log in logs}
    for key, offset in report.buckets.items():
        if int(key) not in ends:  # LakeReport's keys are 1-10 ASCII digits
            raise bad_request(f"buckets.{key}: not a bucket of table {table.name!r} (0..{table.num_buckets - 1})")
        if not 0 <= offset <= ends[int(key)]:
            raise bad_request(
                f"buckets.{key}: offset {offset} is outside the bucket's log [0, {ends[int(key)]}]"
            )
    last = conn.execute("SELECT epoch FROM lake_reports WHERE table_id = ?", (table.table_id,)).fetchone()
    if last is not None and report.epoch < last["epoch"]:
        raise fenced(f"lake report of table {table.name!r}", report.epoch, last["epoch"])
    conn.execute(
        "INSERT OR REPLACE INTO lake_reports VALUES (?, ?, ?)", (table.table_id, report.epoch, report.model_dump_json())
    )
    return report


def _find(conn: sqlite3.Connection, table_id: int) -> LakeReport | None:
    row = conn.execute("SELECT report FROM lake_reports WHERE table_id = ?", (table_id,)).fetchone()
    return LakeReport.model_validate_json(row["report"]) if row else None


def get(conn: sqlite3.Connection, table: TableInfo) -> LakeReport:
    """The table's last report; 404 ``NOT_FOUND`` before its first."""
    report = _find(conn, table.table_id)
    if report is None:
        raise ApiError(404, NOT_FOUND, f"table {table.name!r} (table_id {table.table_id}) has no lake report yet")
    return report


def offsets(conn: sqlite3.Connection, table_id: int) -> dict[int, int]:
    """Bucket -> offset the lake holds (exclusive); empty while nothing is tiered."""
    report = _find(conn, table_id)
    return {int(b): o for b, o in report.buckets.items()} if report else {}
