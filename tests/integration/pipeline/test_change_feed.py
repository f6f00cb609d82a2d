"""End to end with ``lake.change_data_feed = true``, by each writer (delta-spark: its MERGE with
deletion vectors): real store process, local Spark, Delta's change feed read back with delta-rs
(and Spark's ``readChangeFeed`` in a run with the Delta jars). The feed must agree with the lake:
replayed from version 0 it yields the lake's rows exactly, and a round's versions name only the
keys the round changed."""

from __future__ import annotations

import pytest

from tests.support.config import make_config
from tests.support.lake import read_feed, replayed
from tests.support.oracle import TableOracle, assert_lake_equals
from tiering.context import TermContext
from tiering.delta_log.lake import Lake
from tiering.job import TieringJob

pytestmark = [pytest.mark.integration, pytest.mark.delta_jars]  # delta_jars: Spark's Delta reads the lake too


def test_the_feed_replayed_from_version_0_is_the_lake_and_a_round_names_only_its_keys(
    spark, kv_store, lake_writer, tmp_path
):
    client = kv_store.client()
    orders = TableOracle(client, "orders", num_buckets=4)
    orders.upsert(range(300))
    client.take_snapshots("orders")
    orders.churn(60, key_space=360)
    config = make_config(
        tmp_path, kv_store.url, "127.0.0.1:1", **{"lake.change_data_feed": True, "lake.writer": lake_writer}
    )
    lake = Lake.of(config.lake)

    assert TieringJob(spark, TermContext.begin(config, 1)).run().ok
    first = lake.load("orders").version
    before = {k: dict(v) for k, v in orders.rows.items()}
    orders.churn(80, key_space=400)
    orders.upsert([7, 7])
    orders.delete([8, 100_000])
    assert TieringJob(spark, TermContext.begin(config, 1)).run().ok

    assert_lake_equals(lake, orders)
    lake_rows = {r["id"]: r for r in lake.load("orders").to_arrow().to_pylist()}
    assert replayed(read_feed(lake, "orders", 0)) == lake_rows
    changed = {k for k in before.keys() | orders.rows.keys() if before.get(k) != orders.rows.get(k)}
    assert {c["id"] for c in read_feed(lake, "orders", first + 1)} == changed
