"""End to end, in process: real store process, local Spark, real Delta tables."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from tests.support.config import make_config
from tests.support.lake import file_codecs
from tests.support.oracle import TableOracle, assert_lake_equals, lake_rows
from tests.support.waiting import wait_until
from tests.support.writers import log_entry
from tiering.context import TermContext
from tiering.delta_log.lake import Lake
from tiering.errors import FencedEpochError
from tiering.job import CHECKPOINT_FILE_MANAGER, PROGRESS_RETENTION, TieringJob
from tiering.state.lease_file import load_or_create_lease_id

pytestmark = pytest.mark.integration


@pytest.fixture
def kv_store(emptied_kv_store):
    """The module's cases share one store, emptied of tables and leases before each."""
    return emptied_kv_store


def run_available_now(spark, config, epoch: int = 1):
    return TieringJob(spark, TermContext.begin(config, epoch)).run()


def snapshotted(client, name: str, rows: int, num_buckets: int) -> TableOracle:
    """A table holding ids ``0..rows-1`` with a snapshot of every bucket."""
    table = TableOracle(client, name, num_buckets=num_buckets)
    table.upsert(range(rows))
    client.take_snapshots(name)
    return table


def test_three_tables_interleaved_with_snapshots_match_store_row_by_row(spark, kv_store, lake_writer, tmp_path):
    client = kv_store.client()
    tables = [TableOracle(client, name, num_buckets=4) for name in ("orders", "customers", "items")]
    for t in tables:
        t.upsert(range(0, 300))
    client.take_snapshots("orders")
    client.take_snapshots("customers")
    for t in tables:
        t.churn(120, key_space=400)
    client.take_snapshots("orders")
    for t in tables:
        t.churn(60, key_space=500)
        t.delete([1, 2, 3])

    config = make_config(tmp_path, kv_store.url, "127.0.0.1:1", **{"lake.writer": lake_writer})
    result = run_available_now(spark, config)

    assert result.ok, result.failed_tables
    for t in tables:
        assert_lake_equals(tmp_path / "lake", t)
        log_ends = {b.bucket: b.log_end_offset for b in client.log_info(t.name).buckets}
        report = client.get_lake(t.name)
        assert report is not None and report.table_id == t.info.table_id
        assert {int(b): o for b, o in report.buckets.items()} == log_ends
    assert client.list_leases() == [], "a clean stop drops the lease"


def test_second_run_merges_only_new_changes_and_replay_adds_nothing(spark, kv_store, lake_writer, tmp_path):
    client = kv_store.client()
    orders = snapshotted(client, "orders", 200, num_buckets=4)
    config = make_config(tmp_path, kv_store.url, "127.0.0.1:1", **{"lake.writer": lake_writer})
    assert run_available_now(spark, config).ok
    first_version = DeltaTable(str(tmp_path / "lake" / "orders")).version()

    orders.churn(50, key_space=300)
    orders.upsert([7])
    orders.delete([8])
    assert run_available_now(spark, config).ok
    assert_lake_equals(tmp_path / "lake", orders)
    second_version = DeltaTable(str(tmp_path / "lake" / "orders")).version()
    assert second_version == first_version + 1, "one commit per table per round"

    assert run_available_now(spark, config).ok
    assert DeltaTable(str(tmp_path / "lake" / "orders")).version() == second_version, "no changes, no commit"


def test_restarted_query_reuses_the_lease_id_from_its_checkpoint(spark, kv_store, tmp_path):
    client = kv_store.client()
    orders = snapshotted(client, "orders", 50, num_buckets=2)
    config = make_config(tmp_path, kv_store.url, "127.0.0.1:1")
    lease_id = load_or_create_lease_id(config.job.checkpoint, config.job.name)

    seen_leases: list[list[str]] = []
    job = TieringJob(
        spark,
        TermContext.begin(config, 1),
        on_round=lambda o: seen_leases.append([lease.lease_id for lease in client.list_leases()]),
    )
    job.run()
    orders.upsert(range(50, 80))
    client.take_snapshots("orders")
    orders.upsert(range(80, 90))
    job2 = TieringJob(
        spark,
        TermContext.begin(config, 2),
        on_round=lambda o: seen_leases.append([lease.lease_id for lease in client.list_leases()]),
    )
    assert job2.lease.lease_id == lease_id
    job2.run()

    assert seen_leases and all(ids in ([], [lease_id]) for ids in seen_leases), seen_leases
    assert client.list_leases() == []
    assert_lake_equals(tmp_path / "lake", orders)


def test_a_new_term_claims_the_kept_lease_before_its_first_round(spark, kv_store, tmp_path):
    """Nothing to read from a snapshot, so no round acquires: without the claim the previous
    term (a zombie, say) kept the lease's epoch until the renewer's first tick."""
    client = kv_store.client()
    config = make_config(tmp_path, kv_store.url, "127.0.0.1:1")
    lease_id = load_or_create_lease_id(config.job.checkpoint, config.job.name)
    client.acquire_lease(lease_id, 1, 120_000, [])  # what the previous term left

    job = TieringJob(spark, TermContext.begin(config, 2))
    job.start()
    try:
        assert client.get_lease(lease_id).epoch == 2
        with pytest.raises(FencedEpochError):
            client.release_lease(lease_id, 1, [])
    finally:
        job.stop()


def test_the_checkpoint_is_written_through_the_file_system_manager_and_resumed_from(spark, kv_store, tmp_path):
    client = kv_store.client()
    orders = snapshotted(client, "orders", 40, num_buckets=2)
    config = make_config(tmp_path, kv_store.url, "127.0.0.1:1")
    assert run_available_now(spark, config).ok
    orders.upsert(range(30, 60))

    assert run_available_now(spark, config, epoch=2).ok

    key, manager = CHECKPOINT_FILE_MANAGER
    assert spark.conf.get(key) == manager
    assert spark.conf.get(PROGRESS_RETENTION[0]) == PROGRESS_RETENTION[1], "the fixture's session does not set it"
    checkpoint = Path(config.job.checkpoint)
    offsets = sorted(int(p.name) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit())
    commits = sorted(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    assert offsets == commits == list(range(len(offsets))) and len(offsets) >= 2, (offsets, commits)
    assert not [p.name for d in ("offsets", "commits") for p in (checkpoint / d).iterdir() if "tmp" in p.name]
    assert DeltaTable(str(tmp_path / "lake" / "orders")).version() == 1, "the second run resumed: one more commit"
    assert_lake_equals(tmp_path / "lake", orders)


def test_continuous_run_picks_up_new_writes_until_lag_is_zero(spark, kv_store, tmp_path):
    client = kv_store.client()
    orders = snapshotted(client, "orders", 100, num_buckets=4)
    config = make_config(tmp_path, kv_store.url, "127.0.0.1:1", **{"trigger.available_now": False})
    stop = threading.Event()
    job = TieringJob(spark, TermContext.begin(config, 1))
    runner = threading.Thread(target=job.run, kwargs={"stop": stop}, daemon=True)
    runner.start()
    try:
        wait_until(lambda: (tmp_path / "lake" / "orders" / "_delta_log").exists(), what="first commit")
        for _ in range(3):
            orders.churn(40, key_space=200)

        def caught_up() -> bool:
            report = client.get_lake("orders")
            ends = {b.bucket: b.log_end_offset for b in client.log_info("orders").buckets}
            return report is not None and {int(b): o for b, o in report.buckets.items()} == ends

        wait_until(caught_up, timeout_s=90, what="lag to reach zero")
        assert_lake_equals(tmp_path / "lake", orders)
    finally:
        stop.set()
        runner.join(60)
    assert not runner.is_alive()
    assert client.list_leases() == []


def test_a_failing_table_is_released_and_the_others_commit_then_it_recovers(spark, kv_store, tmp_path):
    client = kv_store.client()
    good = TableOracle(client, "good", num_buckets=2)
    bad = TableOracle(client, "bad", num_buckets=2)
    for t in (good, bad):
        t.upsert(range(60))
        client.take_snapshots(t.name)
    # An incompatible lake table already sits where "bad" would land.
    write_deltalake(str(tmp_path / "lake" / "bad"), pa.table({"id": pa.array(["x"]), "other": pa.array([1])}))

    config = make_config(tmp_path, kv_store.url, "127.0.0.1:1")
    result = run_available_now(spark, config)

    assert set(result.failed_tables) == {"bad"}
    assert_lake_equals(tmp_path / "lake", good)
    assert client.list_leases() == [], "the failed table's buckets were released, the lease dropped"
    assert DeltaTable(str(tmp_path / "lake" / "bad")).version() == 0, "nothing committed to the bad table"

    import shutil

    shutil.rmtree(tmp_path / "lake" / "bad")
    assert run_available_now(spark, config).ok
    assert_lake_equals(tmp_path / "lake", bad)
    assert lake_rows(tmp_path / "lake", "good") == good.rows


def test_lake_compression_is_the_codec_of_every_file_a_round_writes(spark, kv_store, tmp_path):
    client = kv_store.client()
    orders = snapshotted(client, "orders", 200, num_buckets=4)
    settings = {"lake.compression": "snappy"}
    executors = make_config(tmp_path, kv_store.url, "127.0.0.1:1", **settings, **{"lake.driver_max_changes": 0})
    assert run_available_now(spark, executors).ok  # the bootstrap: the store's snapshot files copied as they are
    assert newest_files_codecs(tmp_path / "lake", "orders") == {"ZSTD"}

    for config in (executors, make_config(tmp_path, kv_store.url, "127.0.0.1:1", **settings)):  # then the driver
        orders.churn(40, key_space=300)
        result = run_available_now(spark, config)
        assert result.ok, result.failed_tables
        assert newest_files_codecs(tmp_path / "lake", "orders") == {"SNAPPY"}  # beside zstd files: both read
        assert_lake_equals(tmp_path / "lake", orders)


def newest_files_codecs(lake_root: Path, table: str) -> set[str]:
    """The codecs of the files the table's newest commit added."""
    lake = Lake.at(str(lake_root))
    added = [a["path"] for a in log_entry(lake, lake.load(table).version, table).get("add", [])]
    assert added, "the newest commit adds no file"
    return file_codecs(lake, table, added)
