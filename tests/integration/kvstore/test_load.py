"""The store under concurrent load with a SIGKILL in the middle (the short version of
benchmarks/bench_store_load.py): 8 writers (JSON and Arrow), snapshots, GC every 0.2 s, lease
loops. Asserts the invariants only, never timings: no 5xx, every acknowledged write present
after the restart, no snapshot deleted while leased. ``KVSTORE_LOAD_S`` sets the duration.
"""

from __future__ import annotations

import os

import pytest

from benchmarks.bench_store_load import TABLES, run_load

pytestmark = pytest.mark.integration

DURATION_S = float(os.environ.get("KVSTORE_LOAD_S", "16"))


def test_loaded_store_killed_midway_loses_nothing_it_acknowledged(store_factory):
    store = store_factory(gc_interval_s=0.2, num_retained=2)
    outcome = run_load(store, DURATION_S, kill_at_s=DURATION_S / 2)

    assert outcome.violations == []
    assert outcome.recorder.server_errors == []
    assert outcome.restart_s is not None and store.alive()
    assert outcome.acknowledged_rows > 0 and outcome.verified_keys > 0
    assert outcome.leases_checked > 0
    assert {"POST /v1/tables/{}/rows", "POST /v1/tables/{}/rows (arrow)"} <= set(outcome.recorder.latencies)
    assert sorted(t.name for t in store.client().list_tables()) == TABLES
