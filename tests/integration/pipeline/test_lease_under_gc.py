"""The job lease against the store's most aggressive GC.

Setting: one retained snapshot per bucket, GC every 0.1 s, a new snapshot of every changed
bucket every 0.2 s while writers keep changing every bucket, and a read limit that spreads the
bootstraps over many rounds. A snapshot that is not held is therefore gone well within the
time between planning a round and reading it. With the lease, no split ever finds its
snapshot gone; with a lease too short to hold anything (the control), splits do, which proves
the test can fail.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from tests.support.config import make_config
from tests.support.oracle import TableOracle, assert_lake_equals
from tests.support.waiting import wait_until
from tiering.context import TermContext
from tiering.job import TieringJob
from tiering.round.outcome import RoundOutcome

pytestmark = pytest.mark.integration


def tier_under_gc(
    spark,
    store,
    tmp_path,
    *,
    rounds: int = 8,
    enough: Callable[[list[str]], bool] = lambda failures: False,
    **settings,
) -> tuple[list[str], list[TableOracle]]:
    """Tier three churning tables for ``rounds`` rounds, or until ``enough`` says the failures
    seen so far answer the question."""
    client = store.client()
    tables = [TableOracle(client, f"t{i}", num_buckets=4) for i in range(3)]
    for t in tables:
        t.upsert(range(200))
    wait_until(lambda: all(len(client.latest_snapshots(t.name).buckets) == 4 for t in tables), what="first snapshots")

    failures: list[str] = []

    def on_round(outcome: RoundOutcome) -> None:
        failures.extend(f"round {outcome.round_id} {t}: {e}" for t, e in outcome.failed.items())

    config = make_config(
        tmp_path,
        store.url,
        "127.0.0.1:1",
        **{"trigger.available_now": False, "trigger.interval_s": 0.5, "limits.max_splits_per_trigger": 4, **settings},
    )
    stop_writing = threading.Event()

    def write() -> None:
        while not stop_writing.is_set():
            for t in tables:
                t.churn(20, key_space=300)
            stop_writing.wait(0.05)

    writer = threading.Thread(target=write, daemon=True)
    stop = threading.Event()
    job = TieringJob(spark, TermContext.begin(config, 1), on_round=on_round)
    runner = threading.Thread(target=job.run, kwargs={"stop": stop}, daemon=True)
    writer.start()
    runner.start()
    try:
        rounds_needed = job.result.rounds + rounds
        wait_until(
            lambda: job.result.rounds >= rounds_needed or enough(failures),
            timeout_s=150,
            what=f"{rounds} rounds under GC",
        )
    finally:
        stop_writing.set()
        writer.join(10)
    if not failures:
        wait_until(lambda: all(_caught_up(client, t.name) for t in tables), timeout_s=120, what="catch-up")
    stop.set()
    runner.join(60)
    return failures, tables


def _caught_up(client, table: str) -> bool:
    report = client.get_lake(table)
    ends = {b.bucket: b.log_end_offset for b in client.log_info(table).buckets}
    return report is not None and {int(b): o for b, o in report.buckets.items()} == ends


def test_with_the_lease_no_split_ever_finds_its_snapshot_gone(spark, store_factory, tmp_path):
    store = store_factory(num_retained=1, gc_interval_s=0.1, snapshot_interval_s=0.2)
    failures, tables = tier_under_gc(spark, store, tmp_path)
    assert failures == []
    for t in tables:
        assert_lake_equals(tmp_path / "lake", t)
    assert store.client().list_leases() == []


def test_control_a_lease_that_holds_nothing_loses_snapshots_to_gc(spark, store_factory, tmp_path):
    """One snapshot split a round, snapshots and GC twice as often as above: a split read fast
    (a quiet machine, the driver's own reads) must still lose its snapshot in one of the many
    bootstraps; a failed table bootstraps again, so the chances keep coming until one does."""
    store = store_factory(num_retained=1, gc_interval_s=0.05, snapshot_interval_s=0.1)
    failures, _ = tier_under_gc(
        spark,
        store,
        tmp_path,
        rounds=40,
        enough=lambda seen: any(_lost_a_snapshot(f) for f in seen),
        **{"lease.duration_s": 0.001, "lease.renew": False, "limits.max_splits_per_trigger": 1},
    )
    assert any(_lost_a_snapshot(f) for f in failures), failures


def _lost_a_snapshot(failure: str) -> bool:
    """A snapshot went before its split read it: the store answered 410 (the acquire or the
    descriptor came too late), or GC deleted a file while a task was reading it."""
    return "SnapshotUnavailableError" in failure or ("FileNotFoundError" in failure and "/snapshots/" in failure)
