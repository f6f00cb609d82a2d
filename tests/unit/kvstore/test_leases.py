"""The store's lease rules (server/leases.py) on its own SQLite database, the clock given: what a
lease remembers once it expired or was dropped."""

from __future__ import annotations

import pytest

from tiering.kvstore.models import AcquireRequest, BucketRef, ReleaseRequest, RenewRequest, SnapshotRef
from tiering.kvstore.server import leases
from tiering.kvstore.server.db import Database
from tiering.kvstore.server.errors import FENCED_EPOCH, LEASE_NOT_FOUND, ApiError

pytestmark = pytest.mark.unit

LEASE = "orders-" + "a" * 32
REF = SnapshotRef(table_id=1, bucket=0, snapshot_id=3)


@pytest.fixture
def db(tmp_path):
    database = Database(tmp_path / "meta.db")
    yield database
    database.close()


def acquire(db: Database, epoch: int, now_ms: int, duration_ms: int = 1000):
    with db.tx() as conn:
        return leases.acquire(
            conn, LEASE, AcquireRequest(duration_ms=duration_ms, epoch=epoch, snapshots=[REF]), now_ms, lambda r: True
        )


def refused(call) -> str:
    with pytest.raises(ApiError) as refusal:
        call()
    return refusal.value.code


def test_an_expired_lease_keeps_its_epoch_so_a_stale_term_cannot_create_it_again(db):
    acquire(db, epoch=2, now_ms=0)
    with db.tx() as conn:
        assert leases.delete_expired(conn, 5000) == 1, "the lapse ends its holds"
        assert leases.held_snapshots(conn, 1, 5000) == set()

    assert refused(lambda: acquire(db, epoch=1, now_ms=5000)) == FENCED_EPOCH

    def renew() -> None:
        with db.tx() as conn:
            leases.renew(conn, LEASE, RenewRequest(duration_ms=1000, epoch=2), 5000)

    assert refused(renew) == LEASE_NOT_FOUND, "the leader's renewal sees the lapse"


def test_a_lease_looked_at_after_expiry_keeps_its_epoch_too(db):
    acquire(db, epoch=4, now_ms=0)
    with db.tx() as conn:
        leases.forget_if_expired(conn, LEASE, 2000)
        assert leases.list_all(conn, 2000) == []
        assert leases.count_unexpired(conn, 2000) == 0
    assert refused(lambda: acquire(db, epoch=3, now_ms=2000)) == FENCED_EPOCH
    again = acquire(db, epoch=4, now_ms=2000)
    assert (again.epoch, again.snapshots, again.expires_at_ms) == (4, [REF], 3000), "its own term holds it again"


def test_a_dropped_lease_keeps_its_epoch(db):
    acquire(db, epoch=5, now_ms=0)
    with db.tx() as conn:
        leases.drop(conn, LEASE, 5, 10)
        with pytest.raises(ApiError) as unknown:
            leases.get(conn, LEASE, 10)
        assert unknown.value.code == LEASE_NOT_FOUND
    assert refused(lambda: acquire(db, epoch=4, now_ms=20)) == FENCED_EPOCH
    assert acquire(db, epoch=6, now_ms=20).epoch == 6


def test_gc_counts_a_lapse_once(db):
    acquire(db, epoch=1, now_ms=0)
    with db.tx() as conn:
        assert leases.delete_expired(conn, 5000) == 1
        assert leases.delete_expired(conn, 6000) == 0


def test_a_release_of_a_lapsed_lease_is_its_unknown_lease(db):
    acquire(db, epoch=1, now_ms=0)

    def release() -> None:
        with db.tx() as conn:
            leases.release(conn, LEASE, ReleaseRequest(epoch=1, buckets=[BucketRef(table_id=1, bucket=0)]), 5000)

    assert refused(release) == LEASE_NOT_FOUND
