"""Job-scoped snapshot leases and lake reports, both fenced by the job's epoch.

Failure modes this guards against: a zombie driver (an old leadership term) renewing,
releasing or reporting after a newer leader took over — every call carries an epoch, the
lease (or the table's last lake report) remembers the highest one seen, and a lower one is
refused with 409 ``FENCED_EPOCH``; and a crashed job leaking holds forever — holds belong to
the lease and vanish when it expires. An expired lease is deleted the moment anyone looks at
it, so "expired" and "unknown" are the same answer (404).

Functions run inside a caller's transaction. Those that must persist a deletion *and* refuse
the request return the error instead of raising it, so the transaction still commits.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from tiering.kvstore.models import (
    AcquireRequest,
    AcquireResult,
    BucketLog,
    LakeReport,
    Lease,
    ReleaseRequest,
    RenewRequest,
    SnapshotRef,
    TableInfo,
)
from tiering.kvstore.server.errors import CONFLICT, ApiError, bad_request, fenced, lease_not_found


def delete_lease(conn: sqlite3.Connection, lease_id: str) -> None:
    conn.execute("DELETE FROM lease_holds WHERE lease_id = ?", (lease_id,))
    conn.execute("DELETE FROM leases WHERE lease_id = ?", (lease_id,))


def delete_expired(conn: sqlite3.Connection, now_ms: int) -> int:
    expired = [r["lease_id"] for r in conn.execute("SELECT lease_id FROM leases WHERE expires_at_ms <= ?", (now_ms,))]
    for lease_id in expired:
        delete_lease(conn, lease_id)
    return len(expired)


def _current(conn: sqlite3.Connection, lease_id: str, now_ms: int) -> sqlite3.Row | None:
    row = conn.execute("SELECT * FROM leases WHERE lease_id = ?", (lease_id,)).fetchone()
    if row is not None and row["expires_at_ms"] <= now_ms:
        delete_lease(conn, lease_id)
        return None
    return row


def _lease(conn: sqlite3.Connection, lease_id: str) -> Lease:
    row = conn.execute("SELECT * FROM leases WHERE lease_id = ?", (lease_id,)).fetchone()
    holds = conn.execute(
        "SELECT table_id, bucket, snapshot_id FROM lease_holds WHERE lease_id = ? ORDER BY table_id, bucket, snapshot_id",
        (lease_id,),
    ).fetchall()
    return Lease(
        lease_id=lease_id, epoch=row["epoch"], expires_at_ms=row["expires_at_ms"],
        snapshots=[SnapshotRef(**dict(h)) for h in holds],
    )


def _check_epoch(lease_id: str, row: sqlite3.Row, epoch: int) -> None:
    if epoch < row["epoch"]:
        raise fenced(f"lease {lease_id!r}", epoch, row["epoch"])


def acquire(
    conn: sqlite3.Connection, lease_id: str, req: AcquireRequest, now_ms: int,
    available: Callable[[SnapshotRef], bool],
) -> AcquireResult:
    """Create or renew the lease and hold every requested snapshot that still exists."""
    row = _current(conn, lease_id, now_ms)
    if row is not None:
        _check_epoch(lease_id, row, req.epoch)
    epoch = max(req.epoch, row["epoch"] if row else req.epoch)
    conn.execute(
        "INSERT OR REPLACE INTO leases VALUES (?, ?, ?)", (lease_id, epoch, now_ms + req.duration_ms)
    )
    unavailable = []
    for ref in req.snapshots:
        if available(ref):
            conn.execute(
                "INSERT OR IGNORE INTO lease_holds VALUES (?, ?, ?, ?)", (lease_id, ref.table_id, ref.bucket, ref.snapshot_id)
            )
        else:
            unavailable.append(ref)
    return AcquireResult(**_lease(conn, lease_id).model_dump(), unavailable=unavailable)


def renew(conn: sqlite3.Connection, lease_id: str, req: RenewRequest, now_ms: int) -> Lease | ApiError:
    row = _current(conn, lease_id, now_ms)
    if row is None:
        return lease_not_found(lease_id)
    _check_epoch(lease_id, row, req.epoch)
    conn.execute(
        "UPDATE leases SET epoch = ?, expires_at_ms = ? WHERE lease_id = ?", (req.epoch, now_ms + req.duration_ms, lease_id)
    )
    return _lease(conn, lease_id)


def release(conn: sqlite3.Connection, lease_id: str, req: ReleaseRequest, now_ms: int) -> Lease | ApiError:
    row = _current(conn, lease_id, now_ms)
    if row is None:
        return lease_not_found(lease_id)
    _check_epoch(lease_id, row, req.epoch)
    conn.execute("UPDATE leases SET epoch = ? WHERE lease_id = ?", (req.epoch, lease_id))
    conn.executemany(
        "DELETE FROM lease_holds WHERE lease_id = ? AND table_id = ? AND bucket = ?",
        [(lease_id, b.table_id, b.bucket) for b in req.buckets],
    )
    return _lease(conn, lease_id)


def drop(conn: sqlite3.Connection, lease_id: str, epoch: int, now_ms: int) -> ApiError | None:
    row = _current(conn, lease_id, now_ms)
    if row is None:
        return lease_not_found(lease_id)
    _check_epoch(lease_id, row, epoch)
    delete_lease(conn, lease_id)
    return None


def get(conn: sqlite3.Connection, lease_id: str, now_ms: int) -> Lease | ApiError:
    if _current(conn, lease_id, now_ms) is None:
        return lease_not_found(lease_id)
    return _lease(conn, lease_id)


def list_all(conn: sqlite3.Connection, now_ms: int) -> list[Lease]:
    delete_expired(conn, now_ms)
    return [_lease(conn, r["lease_id"]) for r in conn.execute("SELECT lease_id FROM leases ORDER BY lease_id").fetchall()]


def held_snapshots(conn: sqlite3.Connection, now_ms: int) -> set[tuple[int, int, int]]:
    """(table_id, bucket, snapshot_id) held by an unexpired lease: GC must keep these."""
    rows = conn.execute(
        "SELECT h.table_id, h.bucket, h.snapshot_id FROM lease_holds h JOIN leases l ON h.lease_id = l.lease_id "
        "WHERE l.expires_at_ms > ?",
        (now_ms,),
    ).fetchall()
    return {(r["table_id"], r["bucket"], r["snapshot_id"]) for r in rows}


def put_lake(conn: sqlite3.Connection, table: TableInfo, logs: list[BucketLog], report: LakeReport) -> LakeReport:
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


def get_lake(conn: sqlite3.Connection, table_id: int) -> LakeReport | None:
    row = conn.execute("SELECT report FROM lake_reports WHERE table_id = ?", (table_id,)).fetchone()
    return LakeReport.model_validate_json(row["report"]) if row else None


def lake_offsets(conn: sqlite3.Connection, table_id: int) -> dict[int, int]:
    report = get_lake(conn, table_id)
    return {int(b): o for b, o in report.buckets.items()} if report else {}


