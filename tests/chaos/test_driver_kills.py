"""A `tiering run` driver SIGKILLed at random points of its rounds, over and over.

Kill points: the three failpoints of the round committer (before the Delta commit, after it,
after the store report; a trial fails unless its point fired: the driver says so as it dies,
``tiering.failpoints.fired``) and time-based kills at random delays — early ones (leader election,
JVM start, the planning worker's first round) and ones inside a running round. The store's
GC runs at its most aggressive throughout: one retained snapshot, GC every 0.2 s, a new
snapshot of every changed bucket every 0.5 s. Trials chain: each starts from whatever the
previous killed driver left behind (checkpoint, lease, orphan files); between trials the
writers keep changing the tables and new tables appear (so bootstraps keep happening).
Every few trials, and at the end, the crashed lease must lapse by itself, then a clean run must
leave the lake equal to the oracle, no lease, and no file that VACUUM would not remove.

The CI run does ``CHAOS_TRIALS`` (default 4: each failpoint, one kill inside a round) trials,
verified once at the end; `scripts/chaos.sh` runs 24, verified every 3. The seed is
fixed (``CHAOS_SEED``, default below) and printed, so a failing sequence can be replayed.
"""

from __future__ import annotations

import os
import random
import signal
import time

import pytest

from tests.support.config import CHAOS, write_conf
from tests.support.drivers import Driver, run_driver
from tests.support.lake import assert_no_orphans
from tests.support.oracle import TableOracle, assert_lakes_equal, assert_no_duplicates
from tests.support.store import assert_leases_lapse
from tiering.failpoints import fired

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

SEED = int(os.environ.get("CHAOS_SEED", "6061"))
TRIALS = int(os.environ.get("CHAOS_TRIALS", "4"))
VERIFY_EVERY = int(os.environ.get("CHAOS_VERIFY_EVERY", "4"))
FAILPOINTS = ("before_delta_commit", "after_delta_commit", "after_store_report")
#: The first trials cover every kind once; later ones draw at random.
KINDS = (*FAILPOINTS, "time_in_round", "time_early")
#: A trial (a driver's JVM start, its rounds, the kill) takes ~30 s on 2 cores, a clean run as
#: long: the budget grows with the trial count instead of the suite's flat 600 s.
TIME_BUDGET_S = 180 + 60 * TRIALS


def _kill_at_random_time(driver: Driver, rng: random.Random, kind: str) -> str:
    """Kill after a random delay: from spawn (early), or from the query's start (in a round)."""
    if kind == "time_early":
        delay = rng.uniform(0.5, 10.0)
        time.sleep(delay)
        where = f"{delay:.2f}s after spawn"
    else:
        deadline = time.monotonic() + 120
        while not driver.saw("query started") and driver.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        delay = rng.uniform(0.0, 6.0)
        time.sleep(delay)
        where = f"{delay:.2f}s after the query started"
    finished = driver.proc.poll() is not None
    driver.kill()
    return f"{where} ({'had already exited' if finished else 'killed'})"


@pytest.mark.timeout(TIME_BUDGET_S)
def test_driver_sigkilled_at_random_points_never_loses_or_duplicates_rows(store_factory, zk_server, tmp_path):
    print(f"\nchaos driver kills: CHAOS_SEED={SEED} CHAOS_TRIALS={TRIALS}")
    rng = random.Random(SEED)
    store = store_factory(num_retained=1, gc_interval_s=0.2, snapshot_interval_s=0.5)
    client = store.client()
    tables = [
        TableOracle(client, "orders", num_buckets=3, seed=SEED),
        TableOracle(client, "users", num_buckets=2, seed=SEED),
    ]
    for t in tables:
        t.upsert(range(200))
    conf = write_conf(
        tmp_path / "tiering.toml", job="chaos-kills", store_url=store.url, zk_hosts=zk_server.hosts, **CHAOS
    )
    lake = tmp_path / "lake"
    history: list[str] = []
    for trial in range(1, TRIALS + 1):
        kind = KINDS[trial - 1] if trial <= len(KINDS) else rng.choice(KINDS)
        for t in tables:
            t.churn(rng.randrange(20, 80), key_space=400)
        if trial % 3 == 0:
            new = TableOracle(client, f"t{trial}", num_buckets=rng.choice((1, 2, 4)), seed=SEED)
            new.upsert(range(rng.randrange(50, 300)))
            tables.append(new)
        if kind in FAILPOINTS:
            rc, out = run_driver(conf, failpoint=kind)
            what = f"failpoint {kind}: exit {rc}"
            # every trial has changes to tier, so every round reaches its failpoint
            assert rc == -signal.SIGKILL and fired(kind) in out, (
                f"seed {SEED} trial {trial} {what}, not fired:\n{out[-3000:]}"
            )
        else:
            driver = Driver(conf, available_now=True)
            what = f"{kind}: {_kill_at_random_time(driver, rng, kind)}"
        history.append(f"trial {trial}: {what}")
        print(history[-1])
        context = f"seed {SEED}, trials so far: {history}"
        assert_no_duplicates(lake, tables)
        assert_no_orphans(lake, tables)
        if trial % VERIFY_EVERY == 0 or trial == TRIALS:
            assert_leases_lapse(client)
            rc, out = run_driver(conf)
            assert rc == 0, f"{context}: the clean run failed (exit {rc}):\n{out[-3000:]}"
            assert_lakes_equal(lake, tables)
            assert client.list_leases() == [], "a clean stop drops the lease"
            assert_no_orphans(lake, tables)
            print(f"trial {trial}: clean run ok, lake == oracle for {len(tables)} tables")
