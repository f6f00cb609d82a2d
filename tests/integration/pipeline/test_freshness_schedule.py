"""Freshness targets decide which changed tables a round plans (docs/DESIGN.md §5), on real
processes: the store, ZooKeeper, local Spark and Delta.

A job tiers a hot table (a target below the trigger interval) and quiet ones (long targets) while
every table is written to all the time. What is looked for: the hot table is committed at every
round; a quiet table at a fraction of them, yet its lake is never older than its target (measured
as the alert measures it: the age of the oldest store write the lake lacks); `tiering status` shows
no held-back table as failing; at the end, the lake equals the store row by row.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.support.config import make_config
from tests.support.oracle import TableOracle, assert_equal_to_store
from tests.support.running import Writers, caught_up, in_thread
from tests.support.waiting import wait_until
from tiering.delta_log.freshness import freshness_s, oldest_untiered_write_ms
from tiering.delta_log.lake import Lake
from tiering.job import run_as_leader
from tiering.kvstore.reference import ReferenceStore, bucket_log
from tiering.ops.status import job_status
from tiering.round.outcome import RoundOutcome

pytestmark = pytest.mark.integration

HOT_TARGET_S = 1.0
QUIET_TARGET_S = 16.0
#: Rounds after the writes start before the count begins: the bootstrap's slow round no longer
#: bounds the next trigger (tiering.enumerator.schedule.RECENT_GAPS).
SETTLING_ROUNDS = 2
ROUNDS = 8


def test_quiet_tables_leave_the_rounds_to_the_hot_one_yet_meet_their_targets(
    spark, kv_store, zk_hosts, unique_job, tmp_path: Path
):
    client = kv_store.client()
    hot = TableOracle(client, "hot", num_buckets=2)
    quiet = [TableOracle(client, f"quiet{i}", num_buckets=2, seed=i + 1) for i in range(3)]
    tables = [hot, *quiet]
    for table in tables:
        table.upsert(range(50))
    config = make_config(
        tmp_path,
        kv_store.url,
        zk_hosts,
        job=unique_job,
        **{
            "trigger.available_now": False,
            "trigger.interval_s": 1.0,
            "tables.freshness_targets": {"hot": HOT_TARGET_S, "quiet*": QUIET_TARGET_S},
        },
    )
    lake = Lake.of(config.lake)
    outcomes: list[RoundOutcome] = []
    stop = threading.Event()
    job, box = in_thread(lambda: run_as_leader(config, stop=stop, listeners=[outcomes.append]))
    stalest: dict[str, float] = {t.name: 0.0 for t in quiet}
    sampling = threading.Event()
    sampler = threading.Thread(target=_sample, args=(client, lake, quiet, stalest, sampling), daemon=True)
    try:
        wait_until(lambda: box or caught_up(client, lake, tables), "the first rounds", timeout_s=90)
        assert not box, box
        first = len(outcomes) + SETTLING_ROUNDS
        with Writers(tables, key_space=200, batch=5, every_s=0.2):
            sampler.start()
            wait_until(lambda: box or len(outcomes) >= first + ROUNDS, f"{ROUNDS} rounds", timeout_s=90)
            statuses = {t.table: t for t in job_status(config, timeout_s=10).tables}
        wait_until(lambda: box or caught_up(client, lake, tables), "the last writes in the lake", timeout_s=60)
    finally:
        sampling.set()
        stop.set()
        job.join(60)
    sampler.join(10)
    assert box.get("result") is not None and box["result"].ok, box

    window = outcomes[first : first + ROUNDS]
    assert all(not o.failed for o in outcomes), [o.failed for o in outcomes]
    assert all("hot" in o.committed for o in window), [sorted(o.committed) for o in window]
    for table in quiet:
        commits = sum(table.name in o.committed for o in window)
        assert commits <= ROUNDS // 2, (table.name, [sorted(o.committed) for o in window])
        assert stalest[table.name] <= QUIET_TARGET_S, stalest
        assert statuses[table.name].state == "ok" and statuses[table.name].consecutive_failures == 0
    assert_equal_to_store(client, lake, *tables)


def _sample(client, lake: Lake, tables: list[TableOracle], stalest: dict[str, float], done: threading.Event) -> None:
    """The largest freshness each table shows until ``done``, sampled as the metric computes it."""
    while not done.wait(0.5):
        for table in tables:
            loaded = lake.load(table.name)
            position = None if loaded is None else loaded.position(table.info.table_id)
            logs = map(bucket_log, client.log_info(table.name).buckets)
            oldest = oldest_untiered_write_ms(ReferenceStore(client), table.name, position, logs)
            stalest[table.name] = max(stalest[table.name], freshness_s(oldest, int(time.time() * 1000)))
