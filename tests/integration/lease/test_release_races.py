"""The lease's release points racing the renewer, against the real store process: the renewer's
call is held at a fault proxy while the round's thread acts, then let through. Each test fails when
the two calls may land in the other order than the one they were made in."""

from __future__ import annotations

import threading

import pytest

from tests.integration.lease.test_job_lease import (
    LONG_MS,
    holding,
    job_lease,
    lease_id,
    make_table,
    snapshot_ids,
    snapshot_refs,
)
from tests.integration.lease.test_lease_edges import GATEWAY_503
from tests.support.fault_proxy import FaultProxy, Hold, Rule
from tests.support.waiting import STORE_PACE, wait_until
from tiering.kvstore import retry
from tiering.kvstore.client import KvStoreClient
from tiering.lease.holds import SnapshotHolds

pytestmark = pytest.mark.integration

#: How long the round's thread is given to act while the renewer's call is held: without the
#: fix it lands first; with it, it waits for the renewer's call and the test goes on without it.
ROUND_ACTS_S = 5.0


def while_held(proxy: FaultProxy, path: str, renewer_tick, round_acts) -> None:
    """Run ``renewer_tick`` until its call to ``path`` reaches the proxy, then ``round_acts``, then
    let the renewer's call through; both finish."""
    held_back = Hold()
    proxy.add(Rule(held_back, method="POST", path=path))
    tick = threading.Thread(target=renewer_tick, daemon=True)
    tick.start()
    held_back.wait_arrived()
    acts = threading.Thread(target=round_acts, daemon=True)
    acts.start()
    acts.join(ROUND_ACTS_S)
    held_back.release()
    tick.join(60)
    acts.join(60)
    assert not tick.is_alive() and not acts.is_alive()


def test_a_table_that_finishes_while_a_lapsed_lease_is_held_again_stays_released(kv_store):
    client = kv_store.client()
    done = snapshot_refs(client, make_table(client, "race-done"))
    busy = snapshot_refs(client, make_table(client, "race-busy"))
    with FaultProxy(kv_store.url) as proxy:
        lease = job_lease(KvStoreClient(proxy.url), lease_id(), epoch=1, duration_ms=500)
        releases = SnapshotHolds(lease)
        assert releases.hold(done + busy) == []
        wait_until(lambda: lease.held() == [], what="the lease's lapse", **STORE_PACE)
        lease.duration_ms = LONG_MS  # held again for longer than the test looks at it

        while_held(
            proxy,
            r"/v1/leases/[^/]+/acquire",
            lambda: releases.after_renewal(lease.renew()),
            lambda: releases.finished({done[0].table_id: [0, 1]}),
        )

    assert holding(client, lease.lease_id) == snapshot_ids(busy), "only the round in flight is held"
    assert releases.lost() == frozenset()


def test_a_refused_release_sent_again_never_lets_go_of_the_next_rounds_hold(kv_store, monkeypatch):
    monkeypatch.setattr(retry, "STORE_RETRY", retry.instant(retry.STORE_RETRY, attempts=2))
    client = kv_store.client()
    refs = snapshot_refs(client, make_table(client, "race-again"))
    with FaultProxy(kv_store.url) as proxy:
        lease = job_lease(KvStoreClient(proxy.url), lease_id(), epoch=1, duration_ms=LONG_MS)
        releases = SnapshotHolds(lease)
        assert releases.hold(refs) == []
        refusal = proxy.add(Rule(GATEWAY_503, method="POST", path=r"/v1/leases/[^/]+/release"))
        releases.finished({refs[0].table_id: [0, 1]})
        assert refusal.injected >= 1
        proxy.remove(refusal)

        while_held(
            proxy,
            r"/v1/leases/[^/]+/release",
            lambda: releases.after_renewal(True),
            lambda: releases.hold(refs),
        )

    assert holding(client, lease.lease_id) == snapshot_ids(refs), "the next round reads held snapshots"
