"""Schema evolution end to end: real store process, local Spark, real Delta tables.

A column added upstream (``POST /v1/tables/{t}/columns``) reaches the lake in the table's next
round, in that round's one commit, and the lake stays equal to the store row by row (rows
written before the column hold null in it); the other table of the job keeps committing in the
same rounds. A change the lake cannot follow fails that table alone, naming the column. Every
write path runs the same tests (delta-rs with the executors writing, delta-rs with the driver
writing a small changelog round, delta-rs with the change data feed on, delta-spark: in
scripts/test_delta.sh's run, skipped elsewhere).
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from tests.support.config import make_config
from tests.support.oracle import TableOracle, assert_lake_equals
from tests.support.writers import WRITERS, WRITTEN_BY, skip_without_delta_jars, writer_params
from tiering.context import TermContext
from tiering.delta_log.lake import Lake
from tiering.delta_log.layout import lake_schema
from tiering.job import JobResult, TieringJob
from tiering.kvstore.reference import store_table
from tiering.ops.verify import check_table
from tiering.round.outcome import RoundOutcome
from tiering.round.table_states import FailureCause, TableState

pytestmark = pytest.mark.integration


@pytest.fixture(params=writer_params("delta-rs-driver"))  # Spark's Delta reads delta-rs's evolved tables too
def write_path(request, spark) -> str:
    if request.param == "delta-spark":
        skip_without_delta_jars(spark)
    return request.param


@pytest.fixture
def config(write_path, kv_store, tmp_path):
    driver_max_changes = dict(WRITERS)[write_path]
    overrides = (
        {"lake.writer": "delta-spark"}
        if driver_max_changes is None
        else {"lake.driver_max_changes": driver_max_changes, "lake.change_data_feed": write_path == "delta-rs-feed"}
    )
    return make_config(tmp_path, kv_store.url, "127.0.0.1:1", **overrides)


def run(spark, config, epoch: int = 1) -> tuple[JobResult, list[RoundOutcome]]:
    """One availableNow run of the job; its result and every round's outcome."""
    outcomes: list[RoundOutcome] = []
    result = TieringJob(spark, TermContext.begin(config, epoch), on_round=outcomes.append).run()
    return result, outcomes


def data_files(table_dir) -> list[str]:
    """Everything under a table's directory but its Delta log."""
    return sorted(str(p.relative_to(table_dir)) for p in table_dir.rglob("*") if "_delta_log" not in p.parts)


def delta_table(config, name: str) -> DeltaTable:
    return Lake.of(config.lake).load(name).dt


def assert_equal_to_store(client, config, *tables: TableOracle) -> None:
    """The lake equals the test's own record and a snapshot the store takes now, column by column."""
    lake = Lake.of(config.lake)
    for t in tables:
        assert_lake_equals(lake, t)
        check = check_table(client, lake, client.get_table(t.name))
        assert check.equal, check


def metadata_actions(dt: DeltaTable, version: int) -> list[dict]:
    """The ``metaData`` actions of one log entry, read from the ``_delta_log`` JSON."""
    with open(f"{dt.table_uri.removeprefix('file://')}/_delta_log/{version:020d}.json") as f:
        return [a["metaData"] for a in map(json.loads, f) if "metaData" in a]


def committed_round(outcomes: list[RoundOutcome], *tables: str) -> RoundOutcome:
    """The run's one round that committed anything: every table in it, none failed."""
    (committed,) = [o for o in outcomes if any(not c.skipped for c in o.committed.values())]
    assert not committed.failed, committed.failed
    assert all(not committed.committed[t].skipped for t in tables), committed.committed
    return committed


def test_columns_added_upstream_reach_the_lake_while_the_other_table_keeps_committing(
    spark, kv_store, config, write_path
):
    client = kv_store.client()
    orders, users = TableOracle(client, "orders", num_buckets=4), TableOracle(client, "users", num_buckets=2)
    for t in (orders, users):
        t.upsert(range(100))
        client.take_snapshots(t.name)
    assert run(spark, config)[0].ok
    versions = {t: delta_table(config, t).version() for t in ("orders", "users")}

    for step, (column, type_, value) in enumerate([("region", "string", lambda i: f"r{i}"), ("score", "int", int)], 1):
        orders.add_column(column, type_)
        orders.upsert(range(90, 130), **{column: value})  # updates and inserts carrying the column
        orders.upsert(range(0, 10))  # rows written after the add without it
        orders.delete([20, 21])
        users.churn(30, key_space=150)

        result, outcomes = run(spark, config)

        assert result.ok, result.failed_tables
        round_ = committed_round(outcomes, "orders", "users")
        commit = round_.committed["orders"]
        assert commit.added_columns == (column,) and commit.log_buckets and not commit.bootstrap_buckets
        assert commit.written_by == WRITTEN_BY[write_path]
        assert round_.committed["users"].added_columns == ()
        for name in ("orders", "users"):
            assert delta_table(config, name).version() == versions[name] + step, f"{name}: one commit per round"
        dt = delta_table(config, "orders")
        (meta,) = metadata_actions(dt, dt.version())
        assert column in meta["schemaString"]
        assert_equal_to_store(client, config, orders, users)
    scores = {r["id"]: r["score"] for r in Lake.of(config.lake).load("orders").to_arrow().to_pylist()}
    assert (scores[50], scores[0], scores[125]) == (None, None, 125), "untouched, written without it, written with it"


def test_a_bootstrap_reads_a_snapshot_older_than_the_column_and_a_log_with_it(spark, kv_store, config):
    client = kv_store.client()
    orders, users = TableOracle(client, "orders", num_buckets=4), TableOracle(client, "users", num_buckets=2)
    for t in (orders, users):
        t.upsert(range(80))
        client.take_snapshots(t.name)
    orders.add_column("region", "string")
    orders.upsert(range(70, 100), region=lambda i: f"r{i}")
    orders.upsert(range(5))
    orders.delete([30])
    users.churn(20, key_space=100)

    result, outcomes = run(spark, config)

    assert result.ok, result.failed_tables
    commit = committed_round(outcomes, "orders", "users").committed["orders"]
    assert commit.bootstrap_buckets == (0, 1, 2, 3) and commit.log_buckets
    assert "region" in delta_table(config, "orders").schema().to_arrow().names
    assert_equal_to_store(client, config, orders, users)


def _retyped(schema: pa.Schema) -> pa.Schema:
    return schema.set(schema.get_field_index("qty"), pa.field("qty", pa.string()))


def _with_legacy(schema: pa.Schema) -> pa.Schema:
    return schema.append(pa.field("legacy", pa.string()))


@pytest.mark.parametrize(
    "fabricate, message",
    [
        (_retyped, "column 'qty' is integer in the KV table but string in Delta; expected string"),
        (_with_legacy, "column 'legacy' is in Delta but not in the KV table; expected every Delta column to stay"),
    ],
    ids=["other-type", "dropped-column"],
)
def test_a_change_the_lake_cannot_follow_fails_that_table_only(spark, kv_store, config, tmp_path, fabricate, message):
    client = kv_store.client()
    orders, users = TableOracle(client, "orders", num_buckets=2), TableOracle(client, "users", num_buckets=2)
    for t in (orders, users):
        t.upsert(range(50))
    lake = Lake.of(config.lake)
    schema = fabricate(lake_schema(store_table(orders.info)))
    write_deltalake(lake.path("orders"), schema.empty_table(), partition_by=["__bucket"])
    before = data_files(tmp_path / "lake" / "orders")

    result, outcomes = run(spark, config)

    failure = result.failed_tables["orders"]
    assert (failure.cause, failure.state) == (FailureCause.SCHEMA, TableState.ACQUIRED)
    assert str(failure).startswith("SchemaMismatchError: table 'orders': the Delta table at ") and message in str(
        failure
    )
    assert list(result.failed_tables) == ["orders"]
    first = outcomes[0]  # later rounds re-plan orders alone, and fail it again
    assert (list(first.committed), list(first.failed)) == (["users"], ["orders"])
    assert not any("users" in o.failed for o in outcomes)
    assert_lake_equals(lake, users)
    # a table property the writer needs (the change data feed; delta-spark's MERGE: deletion vectors)
    # is set in a commit of its own (metadata only) before the round's checks; nothing of the round is written
    lake_config = config.lake
    adjusted = lake_config.change_data_feed or (
        lake_config.writer == "delta-spark" and lake_config.delta_spark_write == "merge"
    )
    assert delta_table(config, "orders").version() == (1 if adjusted else 0)
    assert data_files(tmp_path / "lake" / "orders") == before, "no data written for orders"
    assert client.list_leases() == []
