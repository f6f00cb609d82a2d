"""JobLease / LeaseRenewer argument checks, on the in-memory store (tests/support/memory_store.py):
none of them reaches a store (the store-backed behaviour: test_job_lease.py, integration/lease)."""

from __future__ import annotations

import pytest

from tests.support.memory_store import MemoryStore
from tiering.lease.job_lease import JobLease, LeaseRenewer

pytestmark = pytest.mark.unit

STORE = MemoryStore()


@pytest.mark.parametrize(
    ("lease_id", "epoch", "duration_ms", "message"),
    [
        ("", 1, 1000, "lease_id is empty"),
        ("L", -1, 1000, "lease L: epoch must be >= 0, got -1"),
        ("L", 1, 0, "lease L: duration_ms must be > 0, got 0"),
    ],
)
def test_bad_arguments_name_the_lease_and_field(lease_id, epoch, duration_ms, message):
    with pytest.raises(ValueError, match=message):
        JobLease(STORE, lease_id, epoch, duration_ms)


def test_renewer_ticks_at_a_third_of_the_duration_unless_told():
    lease = JobLease(STORE, "L", 1, 9000)
    assert LeaseRenewer(lease).interval_s == 3.0
    assert LeaseRenewer(lease, interval_s=0.5).interval_s == 0.5
    with pytest.raises(ValueError, match="lease L: renew interval must be > 0"):
        LeaseRenewer(lease, interval_s=0)


def test_renewer_that_never_ran_has_nothing_to_report():
    renewer = LeaseRenewer(JobLease(STORE, "L", 1, 9000))
    renewer.stop()
    renewer.check()
    assert (renewer.renewals, renewer.failure) == (0, None)
    assert STORE.calls == [], "no argument check reaches the store"
