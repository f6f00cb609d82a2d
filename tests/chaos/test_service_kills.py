"""The services under a running job die and come back: the KV store, ZooKeeper.

The job runs continuously in-process (shared SparkSession) while writers keep changing the
tables and the store's GC runs at its most aggressive (one retained snapshot, GC every 0.2 s,
a snapshot of every changed bucket every 0.5 s). Each service is SIGKILLed at a random point
of a round (seeded) and restarted on the same port and data dir. What must hold after:
the lake catches up with every log end and equals the oracle row by row, no lease outlives
its duration, and no file in the lake is one VACUUM would not remove.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time

import pytest

from tests.support.config import CHAOS_LEASE_S, CHAOS_SESSION_TIMEOUT_S, make_config
from tests.support.lake import assert_no_orphans
from tests.support.oracle import TableOracle, assert_lakes_equal
from tests.support.running import Rounds, Writers, in_thread, wait_caught_up, wait_lake_commits
from tests.support.store import assert_leases_lapse
from tiering.context import TermContext
from tiering.errors import LeadershipLostError
from tiering.job import TieringJob, run_as_leader

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

SEED = int(os.environ.get("CHAOS_SEED", "6061"))
AGGRESSIVE_GC = {"num_retained": 1, "gc_interval_s": 0.2, "snapshot_interval_s": 0.5}


def _tables(client, n: int = 2) -> list[TableOracle]:
    tables = [TableOracle(client, f"s{i}", num_buckets=3, seed=SEED) for i in range(n)]
    for t in tables:
        t.upsert(range(300))
    return tables


def _continuous(tmp_path, store, zk_hosts: str, **overrides):
    return make_config(
        tmp_path,
        store.url,
        zk_hosts,
        **{
            "trigger.available_now": False,
            "trigger.interval_s": 0.3,
            "lease.duration_s": CHAOS_LEASE_S,
            "zookeeper.session_timeout_s": CHAOS_SESSION_TIMEOUT_S,
            **overrides,
        },
    )


def test_store_sigkilled_mid_round_and_restarted(spark, store_factory, tmp_path):
    rng = random.Random(SEED)
    store = store_factory(**AGGRESSIVE_GC)
    client = store.client()
    tables = _tables(client)
    rounds = Rounds()
    job = TieringJob(spark, TermContext.begin(_continuous(tmp_path, store, "127.0.0.1:1"), 1), on_round=rounds)
    stop = threading.Event()
    runner, box = in_thread(lambda: job.run(stop=stop))
    writers = Writers(tables).start()
    try:
        for outage in range(2):
            rounds.wait_for(2, box)
            delay, down = rng.uniform(0.0, 0.4), rng.uniform(1.0, 4.0)
            print(f"seed {SEED}: store outage {outage}: kill {delay:.2f}s into a round, down {down:.1f}s")
            with writers.paused():
                time.sleep(delay)
                store.kill(signal.SIGKILL)
                time.sleep(down)
                store.launch()
        rounds.wait_for(2, box)
    finally:
        writers.stop()
    wait_caught_up(client, str(tmp_path / "lake"), tables)
    stop.set()
    runner.join(120)
    assert "error" not in box, f"the job died with the store outage: {box.get('error')!r}"
    assert box["result"].ok, box["result"].failed_tables
    assert_lakes_equal(tmp_path / "lake", tables)
    assert client.list_leases() == [], "the clean stop dropped the lease"
    assert_no_orphans(tmp_path / "lake", tables)


def test_zookeeper_sigkilled_mid_round_and_restarted(spark, store_factory, zk_factory, tmp_path):
    """The term survives a short outage, or ends with LeadershipLostError and the next term
    finishes the work; either way nothing is lost or doubled."""
    rng = random.Random(SEED + 1)
    store = store_factory(**AGGRESSIVE_GC)
    zk = zk_factory()
    client = store.client()
    tables = _tables(client)
    config = _continuous(tmp_path, store, zk.hosts)
    outcomes: list[str] = []
    stop = threading.Event()

    def lead_until_stopped():
        while not stop.is_set():
            try:
                return run_as_leader(config, stop=stop)
            except LeadershipLostError as e:
                outcomes.append(f"term lost: {e}")

    # run_as_leader takes no on_round: progress is read from the lake instead
    runner, box = in_thread(lead_until_stopped)
    writers = Writers(tables).start()
    try:
        for outage in range(2):
            wait_lake_commits(str(tmp_path / "lake"), tables[0].name, 2)
            delay, down = rng.uniform(0.0, 0.4), rng.choice((1.0, CHAOS_SESSION_TIMEOUT_S * 2))
            print(f"seed {SEED}: zookeeper outage {outage}: kill after {delay:.2f}s, down {down:.1f}s")
            time.sleep(delay)
            zk.kill(signal.SIGKILL)
            time.sleep(down)
            zk.restart()
    finally:
        writers.stop()
    wait_caught_up(client, str(tmp_path / "lake"), tables, timeout_s=180)
    stop.set()
    runner.join(120)
    print(f"zookeeper outages: {outcomes or ['the term survived both']}")
    assert "error" not in box, f"the job failed: {box.get('error')!r}"
    assert box["result"].ok, box["result"].failed_tables
    assert_lakes_equal(tmp_path / "lake", tables)
    assert_leases_lapse(client)
    assert_no_orphans(tmp_path / "lake", tables)
