"""The release points' bucket rules (lease/release.py), as pure functions: a release lets go of a
bucket whole, so what it names is computed by bucket, never by snapshot."""

from __future__ import annotations

import pytest

from tiering.kvstore.models import SnapshotRef
from tiering.lease.release import by_bucket, without_buckets

pytestmark = pytest.mark.unit


def ref(table_id: int, bucket: int, snapshot_id: int = 1) -> SnapshotRef:
    return SnapshotRef(table_id=table_id, bucket=bucket, snapshot_id=snapshot_id)


def test_holds_are_grouped_by_table_and_bucket_whatever_their_snapshots():
    assert by_bucket([ref(1, 0, 1), ref(1, 0, 2), ref(1, 3), ref(2, 0)]) == {1: {0, 3}, 2: {0}}
    assert by_bucket([]) == {}


def test_a_bucket_held_again_is_no_longer_a_release_to_send():
    """A refused release of a bucket the next round holds again would let go of that round's hold."""
    refused = {1: {0, 1}, 2: {5}}
    assert without_buckets(refused, [ref(1, 0, 9)]) == {1: {1}, 2: {5}}
    assert without_buckets(refused, [ref(2, 5), ref(1, 0), ref(1, 1)]) == {}, "tables left empty go"
    assert refused == {1: {0, 1}, 2: {5}}, "a value returned, the argument untouched"


def test_a_new_term_keeps_every_hold_of_a_bucket_it_plans_and_releases_the_rest():
    """Buckets are released whole: a bucket with a planned snapshot keeps its older holds too."""
    holds = [ref(1, 0, 1), ref(1, 0, 2), ref(1, 1, 1), ref(3, 2, 7)]
    planned = [ref(1, 0, 2), ref(4, 0)]
    assert without_buckets(by_bucket(holds), planned) == {1: {1}, 3: {2}}
    assert without_buckets(by_bucket(holds), []) == {1: {0, 1}, 3: {2}}
