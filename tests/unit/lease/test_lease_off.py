"""A store without the lease API (LeaseUnsupportedError from any lease call) turns the lease off
with one WARNING, found as the term starts or by any later call: every verb then does nothing,
and the job tiers without holds rather than failing every round."""

from __future__ import annotations

import logging

import pytest

from tests.unit.lease.conftest import LEASE
from tiering.errors import LeaseUnsupportedError
from tiering.lease.holds import SnapshotHolds

pytestmark = pytest.mark.unit


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def _every_verb(store, lease) -> None:
    a0 = store.latest_snapshots("a")[0]
    assert lease.acquire([a0]) == []
    assert lease.renew() is True
    assert lease.held() == []
    lease.release({1: [0]})
    lease.release_table(1, [0])
    lease.claim()
    lease.drop()


def test_a_store_without_the_lease_api_found_at_the_claim_turns_the_lease_off_with_one_warning(store, lease, caplog):
    store.lease_api = False
    with caplog.at_level(logging.INFO, logger="tiering.lease.job_lease"):
        lease.claim()
        _every_verb(store, lease)

    assert not lease.enabled and lease.expires_at_ms is None
    assert store.calls == ["renew"], "after the claim found out, no verb reaches the store"
    [warning] = _warnings(caplog)
    assert warning.startswith(f"lease {LEASE}: MemoryStore() has no lease API (")
    assert "job tiers WITHOUT snapshot leases this term" in warning
    assert "claimed" not in caplog.text


@pytest.mark.parametrize("verb", ["acquire", "renew", "held", "release", "drop"])
def test_a_store_that_loses_the_lease_api_mid_term_turns_it_off_at_the_next_call(store, lease, caplog, verb):
    lease.acquire([store.latest_snapshots("a")[0]])
    store.lease_api = False
    calls = {
        "acquire": lambda: lease.acquire([store.latest_snapshots("a")[1]]) == [],
        "renew": lambda: lease.renew() is True,
        "held": lambda: lease.held() == [],
        "release": lambda: lease.release({1: [0]}) is None,
        "drop": lambda: lease.drop() is None,
    }
    with caplog.at_level(logging.WARNING, logger="tiering.lease.job_lease"):
        assert calls[verb](), "answers as a lease that is off"
        _every_verb(store, lease)

    assert not lease.enabled and lease.expires_at_ms is None
    assert store.calls == ["acquire", verb]
    assert len(_warnings(caplog)) == 1


def test_the_warning_names_what_the_store_answered(store, lease, caplog):
    cause = OSError("HTTP 404 on /v1/leases")
    unsupported = LeaseUnsupportedError("no lease API")
    unsupported.__cause__ = cause
    store.refuse("renew", unsupported)
    with caplog.at_level(logging.WARNING, logger="tiering.lease.job_lease"):
        lease.claim()
    assert "(HTTP 404 on /v1/leases)" in _warnings(caplog)[0]


def test_the_release_points_of_a_lease_that_is_off_do_nothing(store, lease):
    store.lease_api = False
    releases = SnapshotHolds(lease)
    a0 = store.latest_snapshots("a")[0]

    assert releases.hold([a0]) == []
    assert not lease.enabled
    releases.finished({1: [0]})
    releases.failed(1, [0])
    releases.failed_over({1: [0]})
    releases.after_renewal(False)
    releases.reconcile([], store)
    releases.stopped()

    assert store.calls == ["acquire"]
    assert releases.lost() == frozenset()
