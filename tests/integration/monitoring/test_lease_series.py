"""The lease-expiry series follow the lease calls the store took: acquire and renewal move it (the
seam answers no expiry: the driver counts the lease's duration from when it sent the call, never
later than the store's own), reading the holds does not, a drop removes it (a real store process)."""

from __future__ import annotations

import time

import pytest
from prometheus_client import CollectorRegistry

from tiering.kvstore.reference import ReferenceStore
from tiering.lease.job_lease import JobLease
from tiering.observability import TieringMetrics

pytestmark = pytest.mark.integration


def test_expiry_follows_the_calls_the_store_took_and_a_dropped_lease_has_none(store_client):
    registry = CollectorRegistry()
    metrics = TieringMetrics(registry)
    lease = JobLease(ReferenceStore(store_client), "mon-job-lease", epoch=3, duration_ms=60_000)
    metrics.lease.track("mon-job", lease)

    def expiry() -> float | None:
        return registry.get_sample_value("kv_tiering_lease_expiry_timestamp_seconds", {"job": "mon-job"})

    assert expiry() is None, "nothing known before the store took a call"
    sent = time.time()
    lease.acquire([])
    first = expiry()
    assert first is not None
    assert sent + 60 - 0.001 <= first <= store_client.get_lease("mon-job-lease").expires_at_ms / 1000
    assert registry.get_sample_value("kv_tiering_lease_duration_seconds", {"job": "mon-job"}) == 60
    time.sleep(0.05)
    assert lease.renew() and expiry() > first
    renewed = expiry()
    assert renewed <= store_client.get_lease("mon-job-lease").expires_at_ms / 1000
    assert lease.held() == [] and expiry() == renewed
    lease.drop()
    assert (
        expiry() is None and registry.get_sample_value("kv_tiering_lease_duration_seconds", {"job": "mon-job"}) is None
    )
