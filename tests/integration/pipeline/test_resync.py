"""`tiering resync` end to end: real store process, ZooKeeper, local Spark, real Delta.

A lake table deleted, altered or changed by hand is rebuilt from a fresh snapshot of every bucket
in one commit of a term of its own; the lake then equals the store row by row, the job's next run
continues from the resync's position, and the other table is left as it was. Bad input (a table
the store does not have, one the job does not tier, a driver leading) is refused before anything
is written. The jobs here run through the leader loop (``run_as_leader``), so every term's epoch
comes from ZooKeeper as in production.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from deltalake import DeltaTable, Field

from tests.support.config import write_conf
from tests.support.lake import read_feed, replayed
from tests.support.oracle import TableOracle, assert_equal_to_store, lake_rows
from tiering import cli
from tiering.conf.loader import load_config
from tiering.coord.leader import acquire_leadership
from tiering.delta_log.lake import Lake
from tiering.delta_log.layout import lake_schema
from tiering.job import resync_as_leader, run_as_leader
from tiering.kvstore.models import LakeReport
from tiering.kvstore.reference import store_table
from tiering.round.table_states import FailureCause

pytestmark = pytest.mark.integration


@pytest.fixture
def kv_store(emptied_kv_store):
    """The module's cases share one store, emptied of tables and leases before each."""
    return emptied_kv_store


@pytest.fixture
def conf(kv_store, zk_hosts, unique_job, tmp_path) -> Path:
    return write_conf(
        tmp_path / "tiering.toml",
        job=unique_job,
        store_url=kv_store.url,
        zk_hosts=zk_hosts,
        zookeeper={"session_timeout_s": 4.0},
        trigger={"available_now": True},
        lake={"change_data_feed": True},
    )


@pytest.fixture
def tables(kv_store) -> tuple[TableOracle, TableOracle]:
    client = kv_store.client()
    orders, users = TableOracle(client, "orders", num_buckets=2), TableOracle(client, "users", num_buckets=2)
    for t in (orders, users):
        t.upsert(range(120))
        t.delete(range(0, 120, 7))
    client.take_snapshots("orders")
    orders.churn(30, key_space=200)
    return orders, users


def tier(conf: Path):
    return run_as_leader(load_config(conf, {}))


def test_resync_rebuilds_a_deleted_lake_table_and_the_job_continues_from_it(spark, kv_store, conf, tables, capsys):
    client, (orders, users) = kv_store.client(), tables
    assert tier(conf).ok
    lake = Lake.of(load_config(conf, {}).lake)
    users_version = lake.load("users").version
    shutil.rmtree(conf.parent / "lake" / "orders")
    orders.churn(20, key_space=200)

    assert cli.main(["resync", "orders", "--conf", str(conf)]) == cli.EXIT_OK

    assert "tiering: orders: resynced from snapshots {0: " in capsys.readouterr().out
    assert_equal_to_store(client, lake, orders)
    resynced = lake.load("orders")
    assert resynced.version == 0 and resynced.info.round_id == 0
    assert lake.load("users").version == users_version, "only the named table is touched"
    assert client.list_leases() == [], "the resync's lease is dropped"
    report = client.get_lake("orders")
    assert (report.job, report.lake_version) == (load_config(conf, {}).job.name, 0), "the report names the job"
    orders.churn(20, key_space=200)
    users.churn(20, key_space=200)
    assert tier(conf).ok
    assert_equal_to_store(client, lake, orders, users)
    after = lake.load("orders").info
    assert after.epoch > resynced.info.epoch and after.delta_version > resynced.version


def test_resync_replaces_a_delta_schema_altered_by_hand(spark, kv_store, conf, tables):
    client, (orders, users) = kv_store.client(), tables
    assert tier(conf).ok
    lake = Lake.of(load_config(conf, {}).lake)
    DeltaTable(lake.path("orders")).alter.add_columns(Field("legacy", "string", nullable=True))
    orders.churn(20, key_space=200)
    failed = tier(conf)
    assert failed.failed_tables["orders"].cause is FailureCause.SCHEMA and "'legacy'" in str(
        failed.failed_tables["orders"]
    )

    resync = resync_as_leader(load_config(conf, {}), "orders")

    assert not resync.commit.skipped and resync.reported
    dt = lake.load("orders").dt
    assert dt.schema().to_arrow() == lake_schema(store_table(client.get_table("orders"))), (
        "the KV table's schema, 'legacy' gone"
    )
    assert_equal_to_store(client, lake, orders)
    orders.churn(20, key_space=200)
    assert tier(conf).ok
    assert_equal_to_store(client, lake, orders, users)


def test_resync_restores_rows_removed_by_hand_and_the_feed_records_it(spark, kv_store, conf, tables):
    client, (orders, _) = kv_store.client(), tables
    assert tier(conf).ok
    lake = Lake.of(load_config(conf, {}).lake)
    DeltaTable(lake.path("orders")).delete("id < 60")
    assert len(lake_rows(lake, "orders")) < len(orders.rows)
    before = lake.load("orders").version

    resync = resync_as_leader(load_config(conf, {}), "orders")

    assert_equal_to_store(client, lake, orders)
    assert resync.commit.delta_version == before + 1
    feed = read_feed(lake, "orders", before + 1)
    kinds = {c["_change_type"] for c in feed}
    assert kinds == {"delete", "insert"}, kinds
    rows = {r["id"]: r for r in lake.load("orders").to_arrow().to_pylist()}
    assert replayed(read_feed(lake, "orders", 0)) == rows, "the feed, replayed from version 0, is the lake"


def _unchanged(tmp_path: Path) -> None:
    assert not (tmp_path / "lake").exists(), "nothing written to the lake"
    assert not (tmp_path / "ckpt").exists(), "nothing written to the checkpoint"


@pytest.mark.parametrize(
    "argv, code, message",
    [
        (["resync", "nope"], cli.EXIT_USAGE, "table 'nope' is not in the store at "),
        (["resync", "audit"], cli.EXIT_USAGE, "does not tier table 'audit' ([tables] include/exclude)"),
    ],
    ids=["unknown-table", "not-selected"],
)
def test_resync_refuses_a_table_it_cannot_resync(kv_store, zk_hosts, unique_job, tmp_path, capsys, argv, code, message):
    TableOracle(kv_store.client(), "audit", num_buckets=1).upsert(range(5))
    conf = write_conf(
        tmp_path / "t.toml", job=unique_job, store_url=kv_store.url, zk_hosts=zk_hosts, tables={"exclude": ["audit"]}
    )
    assert cli.main([*argv, "--conf", str(conf)]) == code
    assert message in capsys.readouterr().err
    _unchanged(tmp_path)


def test_resync_is_refused_while_a_driver_leads(kv_store, zk_hosts, unique_job, tmp_path, capsys):
    TableOracle(kv_store.client(), "orders", num_buckets=1).upsert(range(5))
    conf = write_conf(tmp_path / "t.toml", job=unique_job, store_url=kv_store.url, zk_hosts=zk_hosts)
    with acquire_leadership(zk_hosts, unique_job, 5.0, timeout_s=10):
        code = cli.main(["resync", "orders", "--conf", str(conf)])
    assert code == cli.EXIT_FAILURE
    assert f"job {unique_job!r} is led by" in capsys.readouterr().err
    _unchanged(tmp_path)
    assert kv_store.client().list_leases() == []


def test_resync_refuses_a_table_another_job_tiers_naming_it(kv_store, zk_hosts, unique_job, tmp_path, capsys):
    client = kv_store.client()
    orders = TableOracle(client, "orders", num_buckets=1)
    orders.upsert(range(5))
    held = LakeReport(
        table_id=client.get_table("orders").table_id, epoch=7, lake_version=3, buckets={"0": 5}, job="other-job"
    )
    client.report_lake("orders", held)
    conf = write_conf(tmp_path / "t.toml", job=unique_job, store_url=kv_store.url, zk_hosts=zk_hosts)

    assert cli.main(["resync", "orders", "--conf", str(conf)]) == cli.EXIT_FAILURE
    assert "table 'orders' is tiered by job 'other-job'" in capsys.readouterr().err
    _unchanged(tmp_path)
    assert client.get_lake("orders") == held, "the other job's report is left as it was"
    assert client.list_leases() == []
