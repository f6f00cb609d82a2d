"""The release points' bucket rules (lease/holds.py), as pure functions: a release lets go of a
bucket whole, so what it names is computed by bucket, never by snapshot."""

from __future__ import annotations

import pytest

from tests.support.tables import kv_table
from tiering.kvstore.contract import BucketId, SnapshotRef
from tiering.lease.holds import by_bucket, strays, without_buckets

pytestmark = pytest.mark.unit


def ref(table_id: int, bucket: int, snapshot_id: int = 1) -> SnapshotRef:
    return SnapshotRef(table_id=table_id, bucket=bucket, snapshot_id=snapshot_id, log_offset=10 * snapshot_id)


def test_holds_are_grouped_by_table_and_bucket_whatever_their_snapshots():
    assert by_bucket([ref(1, 0, 1), ref(1, 0, 2), ref(1, 3), ref(2, 0)]) == {1: {0, 3}, 2: {0}}
    assert by_bucket([BucketId(1, 0), BucketId(1, 3)]) == {1: {0, 3}}, "a listed hold names its bucket alone"
    assert by_bucket([]) == {}


def test_a_bucket_held_again_is_no_longer_a_release_to_send():
    """A refused release of a bucket the next round holds again would let go of that round's hold."""
    refused = {1: {0, 1}, 2: {5}}
    assert without_buckets(refused, [ref(1, 0, 9)]) == {1: {1}, 2: {5}}
    assert without_buckets(refused, [ref(2, 5), ref(1, 0), ref(1, 1)]) == {}, "tables left empty go"
    assert refused == {1: {0, 1}, 2: {5}}, "a value returned, the argument untouched"


def test_a_new_term_keeps_every_hold_of_a_bucket_it_plans_and_releases_the_rest():
    """Buckets are released whole: a bucket with a planned snapshot keeps its older holds too."""
    holds = [BucketId(1, 0), BucketId(1, 1), BucketId(3, 2)]
    planned = [ref(1, 0, 2), ref(4, 0)]

    def never_asked() -> list:
        raise AssertionError("a store that lists its holds is not asked for its tables")

    assert strays(holds, never_asked, planned) == {1: {1}, 3: {2}}
    assert strays(holds, never_asked, []) == {1: {0, 1}, 3: {2}}
    assert strays([], never_asked, planned) == {}


def test_a_store_that_cannot_list_holds_has_every_unplanned_bucket_of_its_tables_released():
    """Fluss lists no lease's holds: a hold an earlier term left may be on any bucket of any table
    the store has, so every bucket no planned split needs is let go (one not held is no error)."""
    tables = [
        kv_table({"id": "bigint"}, name="a", table_id=1, num_buckets=3),
        kv_table({"id": "bigint"}, name="b", table_id=7, num_buckets=1),
    ]
    assert strays(None, lambda: tables, [ref(1, 1, 5)]) == {1: {0, 2}, 7: {0}}
    assert strays(None, lambda: tables, []) == {1: {0, 1, 2}, 7: {0}}
    assert strays(None, lambda: tables, [ref(1, 0), ref(1, 1), ref(1, 2), ref(7, 0)]) == {}
    assert strays(None, list, []) == {}, "a store without tables: nothing to release"
