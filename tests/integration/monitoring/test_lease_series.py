"""The lease-expiry series follow what the store answers: acquire, renewal and the round's lease
read move it, a drop removes it (a real store process)."""

from __future__ import annotations

import time

import pytest
from prometheus_client import CollectorRegistry

from tiering.lease.job_lease import JobLease
from tiering.observability import TieringMetrics

pytestmark = pytest.mark.integration


def test_expiry_is_the_stores_answer_and_a_dropped_lease_has_none(store_client):
    registry = CollectorRegistry()
    metrics = TieringMetrics(registry)
    lease = JobLease(store_client, "mon-job-lease", epoch=3, duration_ms=60_000)
    metrics.lease.track("mon-job", lease)

    def expiry() -> float | None:
        return registry.get_sample_value("kv_tiering_lease_expiry_timestamp_seconds", {"job": "mon-job"})

    assert expiry() is None, "nothing known before the store answered"
    lease.acquire([])
    first = expiry()
    assert first == store_client.get_lease("mon-job-lease").expires_at_ms / 1000
    assert 55 < first - time.time() <= 60
    assert registry.get_sample_value("kv_tiering_lease_duration_seconds", {"job": "mon-job"}) == 60
    time.sleep(0.05)
    assert lease.renew() and expiry() > first
    renewed = expiry()
    assert lease.state() is not None and expiry() == renewed
    lease.drop()
    assert (
        expiry() is None and registry.get_sample_value("kv_tiering_lease_duration_seconds", {"job": "mon-job"}) is None
    )
