"""Snapshots and log segments vanish under the job: a lapsed lease, a truncated log.

- A lease far shorter than a round, never renewed, under the most aggressive GC: the store
  may delete a snapshot while Spark reads it. The table's round must fail cleanly (its
  buckets released, re-planned from a fresh snapshot), never commit a partial bucket.
- The store stopped past the lease's duration while a round sleeps in its commit: the renewer
  holds the round's snapshots again, and once the round is done the lease holds nothing.
- The store's hard retention cap deletes log segments the lake has not reached: the job
  re-bootstraps the buckets from their latest snapshot, or, with ``fail_on_data_loss``, the
  run exits non-zero naming the table, the bucket and the lost offsets, and the lake is
  left exactly as it was.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import threading
import time

import pytest
from deltalake import DeltaTable

from tests.support.config import CHAOS, make_config, write_conf
from tests.support.drivers import run_driver
from tests.support.lake import assert_no_orphans
from tests.support.oracle import TableOracle, assert_lakes_equal, lake_rows
from tests.support.running import Rounds, Writers, in_thread, wait_caught_up
from tests.support.store import assert_leases_lapse
from tests.support.waiting import wait_until
from tiering import failpoints
from tiering.context import TermContext
from tiering.delta_log.lake import Lake
from tiering.job import TieringJob

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

SEED = int(os.environ.get("CHAOS_SEED", "6061"))
#: What a round failure may say when its snapshot went away under the read.
GONE = ("SnapshotUnavailableError", "FileNotFound", "does not exist", "SNAPSHOT_GONE", "410")


def test_lease_expiring_mid_read_fails_the_table_cleanly_and_the_next_round_reads_a_fresh_snapshot(
    spark, store_factory, tmp_path
):
    rng = random.Random(SEED)
    store = store_factory(num_retained=1, gc_interval_s=0.1, snapshot_interval_s=0.2)
    client = store.client()
    tables = [TableOracle(client, "first", num_buckets=4, seed=SEED)]
    tables[0].upsert(range(400))
    rounds = Rounds()
    config = make_config(
        tmp_path,
        store.url,
        "127.0.0.1:1",
        **{"trigger.available_now": False, "trigger.interval_s": 0.2, "lease.duration_s": 0.05, "lease.renew": False},
    )
    job = TieringJob(spark, TermContext.begin(config, 1), on_round=rounds)
    stop = threading.Event()
    runner, box = in_thread(lambda: job.run(stop=stop))
    writers = Writers(tables, batch=40, every_s=0.05).start()
    try:
        for i in range(2):  # new tables keep arriving while writes go on: more bootstraps to break
            rounds.wait_for(2, box)
            late = TableOracle(client, f"late{i}", num_buckets=rng.choice((2, 4)), seed=SEED)
            late.upsert(range(300))
            with writers.paused():
                tables.append(late)
        rounds.wait_for(3, box)
    finally:
        writers.stop()
    wait_caught_up(client, str(tmp_path / "lake"), tables, timeout_s=180)
    stop.set()
    runner.join(120)
    print(f"seed {SEED}: {rounds.count} rounds, {len(rounds.failures)} table failures: {rounds.failures[:5]}")
    assert "error" not in box, f"the job died: {box.get('error')!r}"
    unexplained = [f for f in rounds.failures if not any(g in f for g in GONE)]
    assert not unexplained, f"round failures other than a vanished snapshot: {unexplained[:3]}"
    assert_lakes_equal(tmp_path / "lake", tables)
    assert_leases_lapse(client, duration_s=0.05)
    assert_no_orphans(tmp_path / "lake", tables)


@pytest.fixture
def capped_store(store_factory):
    return store_factory(log_retention_s=0.0, num_retained=1, gc_interval_s=0.2)


def _truncate_past_the_lake(client, orders: TableOracle, lake_root: str) -> dict[int, int]:
    """Write, snapshot, let the cap delete the segments the lake lacks; returns the lake offsets."""
    position = Lake.at(str(lake_root)).position(orders.name, orders.info.table_id)
    orders.churn(80, key_space=400)
    client.take_snapshots(orders.name)
    wait_until(
        lambda: all(
            b.log_start_offset > position.buckets.get(b.bucket, 0) for b in client.log_info(orders.name).buckets
        ),
        timeout_s=20,
        what="the retention cap to delete segments past the lake offset",
    )
    orders.churn(30, key_space=400)  # and changes after the snapshot, still in the log
    return dict(position.buckets)


def test_log_truncated_past_the_lake_fails_with_data_loss_or_rebootstraps(spark, capped_store, zk_server, tmp_path):
    client = capped_store.client()
    orders = TableOracle(client, "orders", num_buckets=2, seed=SEED)
    orders.upsert(range(200))
    client.take_snapshots("orders")
    lake = tmp_path / "lake"
    config = make_config(tmp_path, capped_store.url, "127.0.0.1:1")
    assert TieringJob(spark, TermContext.begin(config, 1)).run().ok
    assert_lake_equals_before = lake_rows(lake, "orders")
    version = DeltaTable(str(lake / "orders")).version()
    offsets = _truncate_past_the_lake(client, orders, str(lake))

    conf = write_conf(
        tmp_path / "strict.toml",
        job="t-job",
        store_url=capped_store.url,
        zk_hosts=zk_server.hosts,
        **CHAOS,
        limits={"fail_on_data_loss": True},
    )
    rc, out = run_driver(conf)
    assert rc != 0, f"fail_on_data_loss must fail the run:\n{out[-2000:]}"
    assert "DataLossError" in out and "table 'orders'" in out, out[-3000:]
    bucket, lost_from = next(iter(sorted(offsets.items())))
    assert f"bucket {bucket}: the lake is at offset {lost_from}" in out, out[-3000:]
    assert DeltaTable(str(lake / "orders")).version() == version, "a data-loss failure commits nothing"
    assert lake_rows(lake, "orders") == assert_lake_equals_before
    assert_leases_lapse(client)

    assert TieringJob(spark, TermContext.begin(config, 2)).run().ok, (
        "without fail_on_data_loss the buckets are bootstrapped again"
    )
    assert_lakes_equal(lake, [orders])
    assert client.list_leases() == []
    assert_no_orphans(lake, [orders])


def test_a_store_paused_past_the_lease_while_a_round_commits_leaves_no_hold_and_no_unheld_read(
    spark, store_factory, tmp_path, capfd, caplog, monkeypatch
):
    """The round sleeps at its commit's failpoint while the store is stopped past
    ``lease.duration_s``: the renewer finds the lapse and holds the round's snapshots again, the
    round commits what it read under them, and once it is done the lease holds nothing."""
    store = store_factory(num_retained=1, gc_interval_s=0.1)
    client = store.client()
    orders = TableOracle(client, "orders", num_buckets=2, seed=SEED)
    orders.upsert(range(200))
    client.take_snapshots("orders")
    orders.churn(20, key_space=250)
    rounds = Rounds()
    config = make_config(
        tmp_path,
        store.url,
        "127.0.0.1:1",
        **{"trigger.available_now": False, "trigger.interval_s": 0.2, "lease.duration_s": 1.5},
    )
    context = TermContext.begin(config, 1)
    monkeypatch.setenv(failpoints.ENV, "before_delta_commit=sleep:6")
    caplog.set_level(logging.WARNING, logger="tiering.lease")
    job = TieringJob(spark, context, on_round=rounds)
    stop = threading.Event()
    runner, box = in_thread(lambda: job.run(stop=stop))
    try:
        wait_until(
            lambda: failpoints.sleeping("before_delta_commit") in capfd.readouterr().err,
            "the commit's failpoint",
            timeout_s=240,
        )
        monkeypatch.delenv(failpoints.ENV)  # later rounds commit at once
        held = client.get_lease(context.lease_id).snapshots
        assert held, "the round in flight holds its snapshots"
        os.kill(store.pid, signal.SIGSTOP)
        try:
            time.sleep(2.5)  # past lease.duration_s: the store lets the lease lapse as it wakes
        finally:
            os.kill(store.pid, signal.SIGCONT)
        rounds.wait_for(1, box)
        wait_caught_up(client, str(tmp_path / "lake"), [orders])
        assert client.get_lease(context.lease_id).snapshots == [], "no hold outlives the round"
    finally:
        stop.set()
        runner.join(120)
    assert "error" not in box, f"the job died: {box.get('error')!r}"
    assert rounds.failures == [], "no table read an unheld snapshot (it fails snapshot_gone)"
    lapses = [r.getMessage() for r in caplog.records if "lapsed: acquired the" in r.getMessage()]
    assert lapses and f"the {len(held)} snapshots of the round in flight again" in lapses[0], lapses
    assert_lakes_equal(tmp_path / "lake", [orders])
    assert_no_orphans(tmp_path / "lake", [orders])
