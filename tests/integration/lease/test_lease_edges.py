"""The job lease at its edges, against the real store process (and ZooKeeper and local Spark where
a job runs): a store without the lease API, a refused release on an idle job, holds no round
needs, a lease that lapses mid-round, a resync longer than the lease, two jobs' leases on one
snapshot. Each test would fail without the behaviour it names."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

import pytest

from tests.integration.lease.test_job_lease import (
    LONG_MS,
    buckets,
    holding,
    job_lease,
    lease_id,
    make_table,
    snapshot_ids,
    snapshot_refs,
)
from tests.support.config import make_config
from tests.support.fault_proxy import Delay, FaultProxy, Respond, Rule
from tests.support.oracle import TableOracle, assert_lake_equals
from tests.support.waiting import STORE_PACE, wait_until
from tiering.context import TermContext
from tiering.errors import SnapshotUnavailableError
from tiering.job import TieringJob, resync_as_leader
from tiering.kvstore import retry
from tiering.kvstore.client import KvStoreClient
from tiering.kvstore.contract import SnapshotRef
from tiering.lease.holds import SnapshotHolds
from tiering.lease.job_lease import LeaseRenewer
from tiering.observability import LeaseCollector
from tiering.ops.status import held_snapshots
from tiering.state.lease_file import load_or_create_lease_id

pytestmark = pytest.mark.integration

#: How a store that predates the lease API answers its routes (a FastAPI app's unknown route).
NO_ROUTE = Respond(404, b'{"detail": "Not Found"}', "application/json")
#: A gateway's own error shape in front of the store.
GATEWAY_503 = Respond(503, b'{"error": {"code": 503, "message": "upstream connect error"}}', "application/json")


def gone(client, table: str, ref: SnapshotRef) -> bool:
    try:
        client.get_snapshot(table, ref.bucket, ref.snapshot_id)
    except SnapshotUnavailableError:
        return True
    return False


def test_a_store_without_the_lease_api_is_tiered_whole_with_one_warning_and_leases_off(
    spark, kv_store, tmp_path, caplog
):
    client = kv_store.client()
    bootstrapped = TableOracle(client, "boot", num_buckets=2)
    bootstrapped.upsert(range(100))
    client.take_snapshots("boot")
    bootstrapped.churn(30, key_space=150)
    log_only = TableOracle(client, "logs", num_buckets=2)
    log_only.upsert(range(50))
    caplog.set_level(logging.WARNING, logger="tiering.lease.job_lease")
    with FaultProxy(kv_store.url) as proxy:
        no_leases = proxy.add(Rule(NO_ROUTE, path=r"/v1/leases.*"))
        config = make_config(tmp_path, proxy.url, "127.0.0.1:1")
        job = TieringJob(spark, TermContext.begin(config, 1))
        result = job.run()

        assert result.ok, result.failed_tables
        for table in (bootstrapped, log_only):
            assert_lake_equals(tmp_path / "lake", table)
        warnings = [r.getMessage() for r in caplog.records if "has no lease API" in r.getMessage()]
        assert len(warnings) == 1 and "WITHOUT snapshot leases" in warnings[0] and proxy.url in warnings[0]
        assert no_leases.injected == 2, "the claim's renew and the one probe, then no lease call at all"
        assert job.lease.enabled is False
        through_proxy = KvStoreClient(proxy.url)
        assert held_snapshots(through_proxy, None) is None
        assert held_snapshots(through_proxy, job.lease.lease_id) is None, "status shows leases off"
    collector = LeaseCollector()
    collector.track("t-job", job.lease)
    enabled = {f.name: f.samples for f in collector.collect()}["kv_tiering_lease_enabled"]
    assert [(s.labels, s.value) for s in enabled] == [({"job": "t-job"}, 0.0)]
    assert client.list_leases() == [], "the store itself never saw a lease"


def test_one_lease_call_answered_404_by_a_store_that_serves_leases_keeps_them_on(kv_store):
    """A 404 that is not the store's unknown lease turns leases off only when the API is absent."""
    with FaultProxy(kv_store.url) as proxy:
        proxy.add(Rule(NO_ROUTE, path=r"/v1/leases/[^/]+/renew"))
        lease = job_lease(KvStoreClient(proxy.url), lease_id(), epoch=1, duration_ms=LONG_MS)
        lease.claim()
    assert lease.enabled is True


def test_a_store_that_loses_the_lease_api_mid_term_turns_the_lease_off_at_the_next_call(kv_store, caplog):
    """A store rolled back to a release without the lease API after the term's claim: the next
    lease call, whichever verb, turns the lease off with the one WARNING instead of failing."""
    caplog.set_level(logging.WARNING, logger="tiering.lease.job_lease")
    client = kv_store.client()
    refs = snapshot_refs(client, make_table(client, "rolled_back"))
    with FaultProxy(kv_store.url) as proxy:
        lease = job_lease(KvStoreClient(proxy.url), lease_id(), epoch=1, duration_ms=LONG_MS)
        assert lease.acquire(refs[:1]) == [] and lease.enabled and lease.expires_at_ms is not None
        proxy.add(Rule(NO_ROUTE, path=r"/v1/leases.*"))

        assert lease.acquire(refs) == [], "nothing reported gone: nothing was asked"
        assert lease.enabled is False and lease.expires_at_ms is None
        assert lease.renew() is True and lease.held() == []
        lease.release({refs[0].table_id: [0, 1]})
        lease.drop()
    warnings = [r.getMessage() for r in caplog.records if "has no lease API" in r.getMessage()]
    assert len(warnings) == 1 and "WITHOUT snapshot leases" in warnings[0] and proxy.url in warnings[0]
    assert holding(client, lease.lease_id) == snapshot_ids(refs[:1]), "the store never saw the later calls"


def test_a_refused_release_is_sent_at_the_next_renewal_while_the_job_idles(kv_store, monkeypatch):
    """A gateway answers the release 503 in its own shape; no round follows (an idle job), yet
    the renewer lets go of the snapshot once the store takes releases again."""
    monkeypatch.setattr(retry, "STORE_RETRY", retry.instant(retry.STORE_RETRY, attempts=2))
    client = kv_store.client()
    refs = snapshot_refs(client, make_table(client, "idle"))
    with FaultProxy(kv_store.url) as proxy:
        lease = job_lease(KvStoreClient(proxy.url), lease_id(), epoch=1, duration_ms=3000)
        releases = SnapshotHolds(lease)
        assert releases.hold(refs) == []
        refusal = proxy.add(Rule(GATEWAY_503, method="POST", path=r"/v1/leases/[^/]+/release"))
        releases.finished({refs[0].table_id: [0, 1]})
        assert refusal.injected >= 1 and holding(client, lease.lease_id) == snapshot_ids(refs)

        with LeaseRenewer(lease, after=releases.after_renewal) as renewer:
            time.sleep(2.5)  # two renewals while the store still refuses: the holds stay
            assert holding(client, lease.lease_id) == snapshot_ids(refs), "renewed, still held"
            proxy.remove(refusal)
            wait_until(
                lambda: client.get_lease(lease.lease_id).snapshots == [], what="the deferred release", timeout_s=10
            )
            renewer.check()
    assert client.get_lease(lease.lease_id).epoch == 1


def test_a_new_term_releases_the_holds_no_planned_round_needs(spark, kv_store, tmp_path):
    """A driver killed after the planner's acquire and before Spark logged the offset left holds
    under the checkpoint's lease id; the next term lets go of them as it starts, during its run."""
    client = kv_store.client()
    stray = snapshot_refs(client, make_table(client, "stray"))
    config = make_config(
        tmp_path,
        kv_store.url,
        "127.0.0.1:1",
        **{"trigger.available_now": False, "tables.include": ["nothing-*"], "lease.duration_s": 30.0},
    )
    kept_id = load_or_create_lease_id(config.job.checkpoint, config.job.name)
    assert job_lease(client, kept_id, 1, LONG_MS).acquire(stray) == []

    job = TieringJob(spark, TermContext.begin(config, 2))
    job.start()
    try:
        held = client.get_lease(kept_id)
        assert (held.epoch, held.snapshots) == (2, []), "claimed by the new term, the stray holds released"
    finally:
        job.stop()


def test_a_lease_that_lapsed_while_the_store_was_paused_holds_the_round_in_flight_again(store_factory):
    store = store_factory()
    client = store.client()
    refs = snapshot_refs(client, make_table(client, "lapse"))
    lease = job_lease(client, lease_id(), epoch=1, duration_ms=1500)
    releases = SnapshotHolds(lease)
    assert releases.hold(refs) == []
    with LeaseRenewer(lease, interval_s=0.3, after=releases.after_renewal) as renewer:
        os.kill(store.pid, signal.SIGSTOP)
        try:
            time.sleep(2.5)  # past the lease's duration: the store let it lapse
        finally:
            os.kill(store.pid, signal.SIGCONT)
        wait_until(
            lambda: lease.held() == buckets(refs),
            what="the round's snapshots held again",
            **STORE_PACE,
        )
        renewer.check()
    assert releases.lost() == frozenset()


def test_a_snapshot_collected_while_the_lease_was_lapsed_is_lost_never_read_unheld(store_factory):
    store = store_factory(num_retained=1, gc_interval_s=0.1)
    client = store.client()
    held = snapshot_refs(client, make_table(client, "lost"))
    lease = job_lease(client, lease_id(), epoch=1, duration_ms=800)
    releases = SnapshotHolds(lease)
    assert releases.hold(held) == []
    snapshot_refs(client, "lost", 100)  # newer snapshots: only the lease kept the first ones
    assert not any(gone(client, "lost", r) for r in held)
    wait_until(lambda: all(gone(client, "lost", r) for r in held), what="GC after the lapse", **STORE_PACE)

    releases.after_renewal(lease.renew())  # the renewer's tick after the lapse

    assert releases.lost() == frozenset(held)
    assert client.get_lease(lease.lease_id).snapshots == [], "nothing gone is held"


def test_a_resync_longer_than_the_lease_keeps_its_snapshots_held(spark, kv_store, zk_hosts, unique_job, tmp_path):
    """The resync's log lookup is held back past ``lease.duration_s``: its lease must still hold."""
    client = kv_store.client()
    orders = TableOracle(client, "orders", num_buckets=2)
    orders.upsert(range(60))
    stop = threading.Event()

    def write() -> None:  # the log moves past every snapshot, so the resync reads log segments too
        while not stop.wait(0.02):
            orders.churn(2, key_space=80)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        with FaultProxy(kv_store.url) as proxy:
            proxy.add(Rule(Delay(0.5), method="POST", path=r"^/v1/logs"))  # its log ends
            proxy.add(Rule(Delay(4.0), method="POST", path=r"^/v1/segments"))  # its log files
            config = make_config(tmp_path, proxy.url, zk_hosts, job=unique_job, **{"lease.duration_s": 1.5})
            seen: list[int] = []

            def watch() -> None:
                while not stop.is_set():
                    seen.extend(len(x.snapshots) for x in client.list_leases() if x.lease_id.startswith(unique_job))
                    time.sleep(0.2)

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            started = time.monotonic()
            result = resync_as_leader(config, "orders")
            took = time.monotonic() - started
    finally:
        stop.set()
        writer.join(10)
    assert took > 3 * 1.5 and result.commit.delta_version >= 0
    assert len([n for n in seen if n == 2]) * 0.2 > 3.0, f"the lease held both snapshots throughout: {seen}"
    assert [x for x in client.list_leases() if x.lease_id.startswith(unique_job)] == [], "dropped at the end"


def test_two_jobs_leases_on_one_snapshot_one_dropped_gc_keeps_it_for_the_other(store_factory):
    store = store_factory(num_retained=1, gc_interval_s=0.1)
    client = store.client()
    held = snapshot_refs(client, make_table(client, "shared"))
    first = job_lease(client, f"orders-{'a' * 32}", epoch=1, duration_ms=LONG_MS)
    second = job_lease(client, f"orders-eu-{'b' * 32}", epoch=1, duration_ms=LONG_MS)
    assert first.acquire(held) == [] and second.acquire(held) == []
    newer = snapshot_refs(client, "shared", 100)
    snapshot_refs(client, "shared", 200)
    wait_until(lambda: all(gone(client, "shared", r) for r in newer), what="GC of unleased snapshots", **STORE_PACE)

    first.drop()
    time.sleep(1.0)  # ten GC passes
    assert not any(gone(client, "shared", r) for r in held), "the other job's lease still holds them"
    second.drop()
    wait_until(lambda: all(gone(client, "shared", r) for r in held), what="GC once no lease holds them", **STORE_PACE)
