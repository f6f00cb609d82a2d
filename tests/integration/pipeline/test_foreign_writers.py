"""Other writers in the lake: real store process, ZooKeeper, local Spark, real Delta.

Someone appends to or deletes from a tiered table with another tool: the job's next round fails
that table alone (cause ``foreign_write``), naming the commit's version and operation and
``tiering resync`` as the repair, writes nothing on top of it, and commits the other table;
after the resync the job goes on and the lake equals the store. An OPTIMIZE or a vacuum by
someone else changes no data: the job goes on. The other tool here is delta-rs; Spark's own
writes (delta-spark) need the Delta jars, which this machine lacks, but the check reads only the
Delta log (the commit's ``add``/``remove`` actions and their ``dataChange``), which is the same
protocol whoever writes it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from tests.support.config import write_conf
from tests.support.lake import delta_rows
from tests.support.oracle import TableOracle, assert_equal_to_store, lake_rows
from tiering import cli
from tiering.conf.loader import load_config
from tiering.delta_log.lake import Lake
from tiering.job import resync_as_leader, run_as_leader
from tiering.round.table_states import FailureCause

pytestmark = pytest.mark.integration


@pytest.fixture
def conf(kv_store, zk_hosts, unique_job, tmp_path) -> Path:
    return write_conf(
        tmp_path / "tiering.toml",
        job=unique_job,
        store_url=kv_store.url,
        zk_hosts=zk_hosts,
        zookeeper={"session_timeout_s": 4.0},
        trigger={"available_now": True},
    )


@pytest.fixture
def tables(kv_store, conf) -> tuple[TableOracle, TableOracle]:
    """orders and users, tiered once."""
    client = kv_store.client()
    orders, users = TableOracle(client, "orders", num_buckets=2), TableOracle(client, "users", num_buckets=2)
    for t in (orders, users):
        t.upsert(range(100))
    assert tier(conf).ok
    return orders, users


def tier(conf: Path):
    return run_as_leader(load_config(conf, {}))


def _append(dt: DeltaTable) -> None:
    """Rows the store never had, appended by another delta-rs writer."""
    rows = delta_rows(dt).slice(0, 3)
    ids = pa.array([10_000 + i for i in range(rows.num_rows)], pa.int64())
    write_deltalake(dt, rows.set_column(rows.schema.get_field_index("id"), "id", ids), mode="append")


def _delete(dt: DeltaTable) -> None:
    dt.delete("id < 30")


@pytest.mark.parametrize("change, operation", [(_append, "WRITE"), (_delete, "DELETE")], ids=["append", "delete"])
def test_a_foreign_data_change_fails_that_table_until_it_is_resynced(
    spark, kv_store, conf, tables, capsys, change, operation
):
    client, (orders, users) = kv_store.client(), tables
    lake = Lake.of(load_config(conf, {}).lake)
    change(DeltaTable(lake.path("orders")))
    foreign = lake.load("orders").version
    diverged = lake_rows(lake, "orders")
    orders.churn(20, key_space=150)
    users.churn(20, key_space=150)

    result = tier(conf)

    failure = result.failed_tables["orders"]
    assert list(result.failed_tables) == ["orders"] and failure.cause is FailureCause.FOREIGN_WRITE
    assert f"Delta version {foreign} ({operation}) was written by another writer" in failure.message
    assert "`tiering resync orders --conf FILE`" in failure.message
    assert lake.load("orders").version == foreign and lake_rows(lake, "orders") == diverged, "nothing written on top"
    assert_equal_to_store(client, lake, users)
    assert cli.main(["status", "--conf", str(conf), "--json"]) in (cli.EXIT_OK, cli.EXIT_TABLES_FAILING)
    status = {t["table"]: t for t in json.loads(capsys.readouterr().out)["tables"]}
    assert status["orders"]["last_failure_cause"] == "foreign_write"

    resync_as_leader(load_config(conf, {}), "orders")
    assert_equal_to_store(client, lake, orders)
    orders.churn(20, key_space=150)
    assert tier(conf).ok, "the commits before the resync are not looked at again"
    assert_equal_to_store(client, lake, orders, users)


def test_an_optimize_or_vacuum_by_someone_else_changes_no_data_and_the_job_goes_on(spark, kv_store, conf, tables):
    client, (orders, users) = kv_store.client(), tables
    lake = Lake.of(load_config(conf, {}).lake)
    dt = DeltaTable(lake.path("orders"))
    before = dt.version()
    dt.optimize.z_order(["id"])
    dt.optimize.compact()
    dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    dt.update_incremental()
    assert dt.version() >= before + 3, "an OPTIMIZE and a vacuum's two commits"
    orders.churn(20, key_space=150)
    users.churn(20, key_space=150)

    assert tier(conf).ok
    assert_equal_to_store(client, lake, orders, users)
    assert lake.load("orders").info.delta_version > dt.version(), "the job committed on top of them"
