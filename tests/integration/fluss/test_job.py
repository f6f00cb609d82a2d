"""`tiering run` against a real Apache Fluss cluster: a primary-key table bootstrapped from its KV
snapshots under the job's Fluss lease, then its changelog of updates and deletes, lake == Fluss row
by row through an independent read of Fluss (tests/support/fluss_rows.py: a changelog replay of the
keys and a KV lookup of each row, through the Java client).

The driver is a real `tiering run --available-now` process. Held at its first round's Delta commit
(a ``sleep`` failpoint), the snapshots its checkpointed offset names must outlive
``kv.snapshot.num-retained`` newer ones; SIGKILLed there, the next driver replays the round from the
checkpoint under the same lease id and nothing is lost or doubled; after that driver's clean stop
the lease is dropped and Fluss collects the snapshots it held. A log table (no primary key) in the
database is skipped with one warning naming it.
"""

from __future__ import annotations

import uuid

import pytest

from tests.support.drivers import Driver
from tests.support.fluss_job import BUCKETS, COLUMNS, job_conf, lake_rows, row, snapshots_covering_the_log
from tests.support.store_sides import SNAPSHOT_WAIT
from tests.support.waiting import wait_until
from tiering.enumerator.splits import SnapshotSplit
from tiering.failpoints import sleeping
from tiering.state.lease_file import load_or_create_lease_id
from tiering.state.offset_log import newest_batch, read_batch_offset

pytestmark = pytest.mark.integration

pytest.importorskip("fluss")


def test_a_killed_bootstrap_replays_under_the_kept_lease_then_the_changelog_follows(
    fluss_cluster, writer, store, database, zk_server, tmp_path
):
    writer.create_table("orders", COLUMNS, ["id"], BUCKETS)
    writer.create_table("events", {"id": "BIGINT", "what": "STRING"}, None, 1)
    writer.upsert("orders", [row(k) for k in range(300)])
    snapshots_covering_the_log(store, "orders")
    job = f"fluss-{uuid.uuid4().hex[:6]}"
    conf = job_conf(tmp_path, job, fluss_cluster.bootstrap_servers, database, zk_server.hosts)

    held = Driver(conf, available_now=True, failpoint="before_delta_commit=sleep:600")
    try:
        wait_until(lambda: held.saw(sleeping("before_delta_commit")), "the round held at its commit", timeout_s=240)
        batch = newest_batch(str(tmp_path / "ckpt"))
        assert batch is not None, held.tail()
        refs = [s.ref for s in read_batch_offset(str(tmp_path / "ckpt"), batch).splits if isinstance(s, SnapshotSplit)]
        assert len(refs) == BUCKETS, f"a bootstrap round reads every bucket's snapshot: {refs}"
        for version in range(1, fluss_cluster.num_retained + 2):  # more newer snapshots than Fluss retains
            writer.upsert("orders", [row(k, version) for k in range(0, 300, 7)])
            snapshots_covering_the_log(store, "orders")
        assert all(store.snapshot_available("orders", ref) for ref in refs), "the lease keeps the round's snapshots"
    finally:
        held.kill()
    assert not (tmp_path / "lake" / "orders" / "_delta_log").exists(), "the killed round wrote nothing"
    lease_id = load_or_create_lease_id(str(tmp_path / "ckpt"), job)

    writer.delete("orders", [{"id": k} for k in range(0, 300, 11)])
    replay = Driver(conf, available_now=True)
    assert replay.wait(300) == 0, replay.tail()
    assert lake_rows(tmp_path, "orders") == writer.current_rows("orders")
    assert not (tmp_path / "lake" / "events").exists()
    assert replay.output().count("has no primary key: skipped") >= 1, replay.tail()
    assert load_or_create_lease_id(str(tmp_path / "ckpt"), job) == lease_id, "the checkpoint's lease"

    for version in range(10, 10 + fluss_cluster.num_retained + 1):  # dropped at the clean stop: collected
        writer.upsert("orders", [row(k, version) for k in range(1, 300, 13)])
        snapshots_covering_the_log(store, "orders")
    for ref in refs:
        wait_until(lambda ref=ref: not store.snapshot_available("orders", ref), f"{ref} collected", **SNAPSHOT_WAIT)

    writer.upsert("orders", [row(k, 20) for k in range(0, 400, 3)])
    writer.delete("orders", [{"id": k} for k in range(5, 300, 17)])
    changelog = Driver(conf, available_now=True)
    assert changelog.wait(300) == 0, changelog.tail()
    assert lake_rows(tmp_path, "orders") == writer.current_rows("orders")
