"""A tiering group's table epochs at the store (docs/DESIGN.md §3): one table, one group; a member
that lost a table is refused its lake reports and acquires for it, naming the new owner."""

from __future__ import annotations

import pytest
import requests

from tests.support.store import orders_spec
from tiering.errors import ConflictError, FencedEpochError, TableEpochFencedError
from tiering.kvstore.models import BucketRef, LakeReport, SnapshotRef, TableEpoch, TableOwners

pytestmark = pytest.mark.integration


@pytest.fixture
def kv_store(emptied_kv_store):
    """The module's cases share one store, emptied of tables and leases before each."""
    return emptied_kv_store


def _setup(client):
    info = client.create_table(orders_spec(num_buckets=2))
    client.upsert("orders", [{"id": i, "amount": 1.0} for i in range(10)])
    ends = {str(b.bucket): b.log_end_offset for b in client.log_info("orders").buckets}

    def report(job: str, epoch: int, table_epoch: int | None, group: str | None = "g", version: int = 1) -> LakeReport:
        return LakeReport(
            table_id=info.table_id,
            epoch=epoch,
            lake_version=version,
            buckets=ends,
            job=job,
            group=group,
            table_epoch=table_epoch,
        )

    return info, report


def test_members_of_a_group_take_turns_and_a_lower_table_epoch_is_refused(kv_store):
    client = kv_store.client()
    info, report = _setup(client)
    client.report_lake("orders", report("a", 7, 1))
    client.report_lake("orders", report("b", 2, 2, version=2))  # another member, its own lower job epoch
    assert client.get_lake("orders") == report("b", 2, 2, version=2)

    with pytest.raises(TableEpochFencedError) as fenced:
        client.report_lake("orders", report("a", 8, 1, version=3))  # a's newer job term: the table still moved
    assert not isinstance(fenced.value, FencedEpochError), "a moved table fences that table, not the term"
    assert fenced.value.status == 409 and fenced.value.code == "TABLE_EPOCH_FENCED"
    assert all(part in str(fenced.value) for part in ("job 'a'", "table epoch 1", "job 'b'", "table epoch 2"))
    assert client.get_lake("orders") == report("b", 2, 2, version=2), "nothing of the stale owner stored"

    with pytest.raises(TableEpochFencedError):  # the same epoch from another job: each epoch has one owner
        client.report_lake("orders", report("c", 1, 2, version=3))
    client.report_lake("orders", report("a", 8, 3, version=3))  # a owns it again, at a newer table epoch
    assert client.get_lake("orders").job == "a"
    assert client.lake_holder_groups(["orders"]) == {"orders": ("a", "g")}
    plain = requests.get(f"{kv_store.url}/v1/logs", timeout=10).json()["tables"][0]
    assert "lake_group" not in plain and "lake_job" not in plain, "only a client that asks for holders"


def test_a_batch_answers_a_moved_table_alone(kv_store):
    client = kv_store.client()
    info, report = _setup(client)
    other = client.create_table(orders_spec(num_buckets=1, name="items"))
    client.report_lake("orders", report("b", 1, 2))
    items = LakeReport(table_id=other.table_id, epoch=1, lake_version=1, buckets={}, job="a", group="g", table_epoch=1)
    answers = client.report_lakes({"orders": report("a", 1, 1, version=2), "items": items})
    assert isinstance(answers["orders"], TableEpochFencedError) and answers["items"] is None
    assert client.get_lake("items") == items and client.get_lake("orders").job == "b"


def test_one_table_one_group(kv_store):
    client = kv_store.client()
    info, report = _setup(client)
    client.report_lake("orders", report("a", 1, 1))
    for outsider in (report("x", 1, None, group=None), report("x", 1, 1, group="other")):
        with pytest.raises(ConflictError) as other:
            client.report_lake("orders", outsider)
        assert other.value.code == "OTHER_JOB" and "group 'g'" in str(other.value)
    client.report_lake("orders", report("a", 2, None, group=None, version=2))  # a leaving its group keeps it


def test_an_acquire_under_a_lower_table_epoch_is_refused_and_releases_pass(kv_store):
    client = kv_store.client()
    info = client.create_table(orders_spec(num_buckets=1))
    client.upsert("orders", [{"id": 1, "amount": 1.0}])
    snap = client.take_snapshots("orders").buckets[0]
    ref = SnapshotRef(table_id=info.table_id, bucket=0, snapshot_id=snap.snapshot_id)

    def owners(job: str, table_epoch: int) -> TableOwners:
        return TableOwners(group="g", job=job, tables=[TableEpoch(table_id=info.table_id, table_epoch=table_epoch)])

    old = client.acquire_lease("a-" + "0" * 32, 1, 60_000, [ref], owners=owners("a", 1))
    assert old.snapshots == [ref]
    client.acquire_lease("b-" + "1" * 32, 1, 60_000, [ref], owners=owners("b", 2))
    with pytest.raises(TableEpochFencedError) as fenced:
        client.acquire_lease("a-" + "0" * 32, 1, 60_000, [ref], owners=owners("a", 1))
    assert "job 'b'" in str(fenced.value) and "table epoch 2" in str(fenced.value)
    # the stale owner still lets go of its own holds; a job outside any group acquires as ever
    released = client.release_lease("a-" + "0" * 32, 1, [BucketRef(table_id=info.table_id, bucket=0)])
    assert released.snapshots == []
    assert client.acquire_lease("c-" + "2" * 32, 1, 60_000, [ref]).snapshots == [ref]


def test_a_claim_without_snapshots_is_asked_alone_and_a_refused_acquire_holds_nothing(kv_store):
    """What the round committer relies on to find which table of a refused acquire moved."""
    client = kv_store.client()
    orders = client.create_table(orders_spec(num_buckets=1))
    items = client.create_table(orders_spec(num_buckets=1, name="items"))
    refs = []
    for name, info in (("orders", orders), ("items", items)):
        client.upsert(name, [{"id": 1, "amount": 1.0}])
        snap = client.take_snapshots(name).buckets[0]
        refs.append(SnapshotRef(table_id=info.table_id, bucket=0, snapshot_id=snap.snapshot_id))

    def owners(job: str, **epochs: int) -> TableOwners:
        ids = {"orders": orders.table_id, "items": items.table_id}
        return TableOwners(
            group="g", job=job, tables=[TableEpoch(table_id=ids[t], table_epoch=e) for t, e in epochs.items()]
        )

    lease_a, lease_b = "a-" + "0" * 32, "b-" + "1" * 32
    client.acquire_lease(lease_a, 1, 60_000, [])
    client.acquire_lease(lease_b, 1, 60_000, [], owners=owners("b", orders=2))  # b took orders
    with pytest.raises(TableEpochFencedError):
        client.acquire_lease(lease_a, 1, 60_000, refs, owners=owners("a", orders=1, items=1))
    assert client.get_lease(lease_a).snapshots == [], "refused whole: nothing held"
    with pytest.raises(TableEpochFencedError):
        client.acquire_lease(lease_a, 1, 60_000, [], owners=owners("a", orders=1))
    assert client.acquire_lease(lease_a, 1, 60_000, [], owners=owners("a", items=1)).snapshots == []
    assert client.acquire_lease(lease_a, 1, 60_000, refs[1:], owners=owners("a", items=1)).snapshots == refs[1:]
