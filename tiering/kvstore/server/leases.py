"""Job-scoped snapshot leases, fenced by the job's epoch.

Failure modes this guards against: a zombie driver (an old leadership term) renewing,
releasing or dropping after a newer leader took over — every call carries an epoch, the lease
remembers the highest one seen, and a lower one is refused with 409 ``FENCED_EPOCH``; and a
crashed job leaking holds forever — holds belong to the lease and vanish when it expires.
"Expired" and "unknown" are the same answer (404 ``LEASE_NOT_FOUND``), and an expired lease's
holds are deleted the moment anyone looks at it (:func:`forget_if_expired`).

A lease's row outlives the lease: expiry and a drop end its holds and leave its epoch (the row,
``expires_at_ms`` 0, is its tombstone). Were the row deleted, a stale term could create the lease
again at its old epoch after a lapse, and the leader's next renewal would find a live lease and
never learn that its holds had lapsed. One row per lease id ever used, a few bytes each.

Functions run inside a caller's transaction and raise ``ApiError`` on refusal, which rolls
that transaction back; a deletion that must outlive a refusal therefore runs in a transaction
of its own first.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from tiering.kvstore.models import AcquireRequest, AcquireResult, Lease, ReleaseRequest, RenewRequest, SnapshotRef
from tiering.kvstore.server import table_epochs
from tiering.kvstore.server.errors import fenced, lease_not_found

#: ``expires_at_ms`` of a lease that ended (expired and looked at, or dropped): its epoch's tombstone.
_ENDED = 0


def end_lease(conn: sqlite3.Connection, lease_id: str) -> None:
    """Delete the lease's holds and keep its epoch (the module's docstring says why)."""
    conn.execute("DELETE FROM lease_holds WHERE lease_id = ?", (lease_id,))
    conn.execute("UPDATE leases SET expires_at_ms = ? WHERE lease_id = ?", (_ENDED, lease_id))


def delete_expired(conn: sqlite3.Connection, now_ms: int) -> int:
    """End every lease that expired since it was last looked at; returns how many."""
    expired = [
        r["lease_id"]
        for r in conn.execute(
            "SELECT lease_id FROM leases WHERE expires_at_ms > ? AND expires_at_ms <= ?", (_ENDED, now_ms)
        )
    ]
    for lease_id in expired:
        end_lease(conn, lease_id)
    return len(expired)


def forget_if_expired(conn: sqlite3.Connection, lease_id: str, now_ms: int) -> None:
    """End the lease if it has expired, so a later acquire starts with no holds (at an epoch no
    lower than the lease's)."""
    row = conn.execute("SELECT expires_at_ms FROM leases WHERE lease_id = ?", (lease_id,)).fetchone()
    if row is not None and _ENDED < row["expires_at_ms"] <= now_ms:
        end_lease(conn, lease_id)


def count_unexpired(conn: sqlite3.Connection, now_ms: int) -> int:
    return conn.execute("SELECT COUNT(*) FROM leases WHERE expires_at_ms > ?", (now_ms,)).fetchone()[0]


def _live(conn: sqlite3.Connection, lease_id: str, now_ms: int) -> sqlite3.Row:
    row = conn.execute("SELECT * FROM leases WHERE lease_id = ? AND expires_at_ms > ?", (lease_id, now_ms)).fetchone()
    if row is None:
        raise lease_not_found(lease_id)
    return row


def _lease(conn: sqlite3.Connection, lease_id: str) -> Lease:
    row = conn.execute("SELECT * FROM leases WHERE lease_id = ?", (lease_id,)).fetchone()
    holds = conn.execute(
        "SELECT table_id, bucket, snapshot_id FROM lease_holds "
        "WHERE lease_id = ? ORDER BY table_id, bucket, snapshot_id",
        (lease_id,),
    ).fetchall()
    return Lease(
        lease_id=lease_id,
        epoch=row["epoch"],
        expires_at_ms=row["expires_at_ms"],
        snapshots=[SnapshotRef(**dict(h)) for h in holds],
    )


def _check_epoch(lease_id: str, row: sqlite3.Row, epoch: int) -> None:
    if epoch < row["epoch"]:
        raise fenced(f"lease {lease_id!r}", epoch, row["epoch"])


def acquire(
    conn: sqlite3.Connection,
    lease_id: str,
    req: AcquireRequest,
    now_ms: int,
    available: Callable[[SnapshotRef], bool],
) -> AcquireResult:
    """Create or renew the lease and hold every requested snapshot that still exists; with
    ``owners`` (a group member's), refused whole when one of its tables moved to another member."""
    forget_if_expired(conn, lease_id, now_ms)  # rolled back with a refusal: an expired hold protects nothing
    row = conn.execute("SELECT epoch FROM leases WHERE lease_id = ?", (lease_id,)).fetchone()
    if row is not None:
        _check_epoch(lease_id, row, req.epoch)
    if req.owners is not None:
        for owned in req.owners.tables:
            owner = table_epochs.Owner(req.owners.group, req.owners.job, owned.table_epoch)
            table_epochs.claim(
                conn, owned.table_id, f"acquire of lease {lease_id!r} for table_id {owned.table_id}", owner
            )
    epoch = max(req.epoch, row["epoch"] if row else req.epoch)
    conn.execute("INSERT OR REPLACE INTO leases VALUES (?, ?, ?)", (lease_id, epoch, now_ms + req.duration_ms))
    unavailable = []
    for ref in req.snapshots:
        if available(ref):
            conn.execute(
                "INSERT OR IGNORE INTO lease_holds VALUES (?, ?, ?, ?)",
                (lease_id, ref.table_id, ref.bucket, ref.snapshot_id),
            )
        else:
            unavailable.append(ref)
    return AcquireResult(**_lease(conn, lease_id).model_dump(), unavailable=unavailable)


def renew(conn: sqlite3.Connection, lease_id: str, req: RenewRequest, now_ms: int) -> Lease:
    _check_epoch(lease_id, _live(conn, lease_id, now_ms), req.epoch)
    conn.execute(
        "UPDATE leases SET epoch = ?, expires_at_ms = ? WHERE lease_id = ?",
        (req.epoch, now_ms + req.duration_ms, lease_id),
    )
    return _lease(conn, lease_id)


def release(conn: sqlite3.Connection, lease_id: str, req: ReleaseRequest, now_ms: int) -> Lease:
    _check_epoch(lease_id, _live(conn, lease_id, now_ms), req.epoch)
    conn.execute("UPDATE leases SET epoch = ? WHERE lease_id = ?", (req.epoch, lease_id))
    conn.executemany(
        "DELETE FROM lease_holds WHERE lease_id = ? AND table_id = ? AND bucket = ?",
        [(lease_id, b.table_id, b.bucket) for b in req.buckets],
    )
    return _lease(conn, lease_id)


def drop(conn: sqlite3.Connection, lease_id: str, epoch: int, now_ms: int) -> None:
    _check_epoch(lease_id, _live(conn, lease_id, now_ms), epoch)
    end_lease(conn, lease_id)


def get(conn: sqlite3.Connection, lease_id: str, now_ms: int) -> Lease:
    _live(conn, lease_id, now_ms)
    return _lease(conn, lease_id)


def list_all(conn: sqlite3.Connection, now_ms: int) -> list[Lease]:
    return [
        _lease(conn, r["lease_id"])
        for r in conn.execute(
            "SELECT lease_id FROM leases WHERE expires_at_ms > ? ORDER BY lease_id", (now_ms,)
        ).fetchall()
    ]


def held_snapshots(conn: sqlite3.Connection, table_id: int, now_ms: int) -> set[tuple[int, int]]:
    """(bucket, snapshot_id) of the table held by an unexpired lease: GC must keep these."""
    rows = conn.execute(
        "SELECT h.bucket, h.snapshot_id FROM lease_holds h JOIN leases l ON h.lease_id = l.lease_id "
        "WHERE h.table_id = ? AND l.expires_at_ms > ?",
        (table_id, now_ms),
    ).fetchall()
    return {(r["bucket"], r["snapshot_id"]) for r in rows}
