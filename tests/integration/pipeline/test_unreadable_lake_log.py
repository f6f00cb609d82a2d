"""A table whose Delta log the lake cannot give back: the query goes on without it.

The planner reads every table's lake position each round; an object store that fails that read
for one table (here: a log entry that does not parse, as a truncated or refused read would)
used to fail the whole query. Now that table is left out of the round with a warning naming it,
its location and the answer; the other table commits, and once the log reads again the table
catches up: lake == store.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.config import write_conf
from tests.support.oracle import TableOracle, assert_equal_to_store, lake_rows
from tiering.conf.loader import load_config
from tiering.delta_log.lake import Lake
from tiering.job import run_as_leader
from tiering.ops.status import job_status

pytestmark = pytest.mark.integration


def test_a_table_whose_log_cannot_be_read_is_left_out_and_catches_up_once_it_reads(
    spark, kv_store, zk_hosts, unique_job, tmp_path
):
    conf = write_conf(
        tmp_path / "tiering.toml",
        job=unique_job,
        store_url=kv_store.url,
        zk_hosts=zk_hosts,
        zookeeper={"session_timeout_s": 4.0},
        trigger={"available_now": True},
    )
    client = kv_store.client()
    orders, users = TableOracle(client, "orders", num_buckets=2), TableOracle(client, "users", num_buckets=2)
    for t in (orders, users):
        t.upsert(range(100))
    assert run_as_leader(load_config(conf, {})).ok
    lake = Lake.of(load_config(conf, {}).lake)
    before = lake_rows(lake, "orders")
    unreadable = Path(lake.path("orders")) / "_delta_log" / f"{lake.load('orders').version + 1:020d}.json"
    unreadable.write_text("{not a log entry")
    orders.churn(20, key_space=150)
    users.churn(20, key_space=150)

    outcomes = []
    result = run_as_leader(load_config(conf, {}), listeners=[outcomes.append])

    assert result.ok and result.rounds >= 1, "the query survived the unreadable table"
    assert_equal_to_store(client, lake, users)
    assert [sorted(o.committed) for o in outcomes if o.committed] == [["users"]]
    assert not any("orders" in o.failed for o in outcomes), "left out by the planner, not planned and failed"
    status = {t.table: t for t in job_status(load_config(conf, {}), timeout_s=10).tables}
    assert (status["orders"].state, status["users"].state) == ("lake unreadable", "ok"), "status names it, and only it"
    assert "DeltaError" in status["orders"].lake_error
    unreadable.unlink()
    assert lake_rows(lake, "orders") == before, "nothing was written to the unreadable table"

    assert run_as_leader(load_config(conf, {})).ok
    assert_equal_to_store(client, lake, orders, users)
