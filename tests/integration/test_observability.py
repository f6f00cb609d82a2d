"""The per-round hook: one log line per table with the numbers an operator needs, and metrics.

The lease holdings come from the real store (``JobLease.held()``), so the store runs."""

from __future__ import annotations

import logging
import re

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from prometheus_client import CollectorRegistry

from tests.support.config import write_conf
from tests.support.lake import delta_rows
from tests.support.oracle import TableOracle
from tiering.conf.loader import load_config
from tiering.context import TermContext
from tiering.coord.ownership import OwnedTables
from tiering.delta_log.lake import Lake
from tiering.job import run_as_leader
from tiering.kvstore import retry
from tiering.kvstore.client import KvStoreClient
from tiering.kvstore.contract import SnapshotRef
from tiering.kvstore.models import TableSpec
from tiering.kvstore.reference import ReferenceStore
from tiering.observability import RoundObserver, TieringMetrics
from tiering.round.health import TableHealth
from tiering.round.outcome import RoundOutcome
from tiering.round.table_states import FailureCause, TableFailure, TableState
from tiering.writers.round_writer import TableCommit

pytestmark = pytest.mark.integration


def context(tmp_path, store_url: str = "http://127.0.0.1:9", **settings: str) -> TermContext:
    config = load_config(
        None,
        {},
        {
            "job.name": "obs-job",
            "job.checkpoint": str(tmp_path / "ckpt"),
            "kvstore.url": store_url,
            "zookeeper.hosts": "127.0.0.1:9",
            "lake.root": str(tmp_path / "lake"),
            **settings,
        },
    )
    return TermContext(config=config, epoch=5, lease_id="obs-job-lease")


DISK_FULL = TableFailure(FailureCause.COMMIT, TableState.WRITTEN, "LakeCommitError", "disk full")


def outcome(table_id: int = 3, positions: dict[int, int] | None = None, round_id: int = 42) -> RoundOutcome:
    orders = TableCommit(
        table="orders",
        table_id=table_id,
        delta_version=7,
        positions=positions or {0: 120, 1: 80},
        skipped=False,
        bootstrap_buckets=(1,),
        log_buckets=(0, 1),
        rows_in=250,
        rows_out=900,
    )
    health = {
        "orders": TableHealth(
            table="orders", table_id=table_id, last_commit_version=7, last_commit_ms=1_700_000_000_000
        ),
        "users": TableHealth(
            table="users", table_id=9, consecutive_failures=4, last_failure="disk full", dropped_ms=1_700_000_000_000
        ),
    }
    return RoundOutcome(
        round_id=round_id,
        epoch=5,
        committed={"orders": orders},
        failed={"users": DISK_FULL},
        lag={"orders": 15},
        health=health,
    )


def sample(registry: CollectorRegistry, name: str, **labels) -> float | None:
    return registry.get_sample_value(name, labels)


def test_a_round_logs_one_line_per_table_and_sets_the_metrics(tmp_path, caplog, store_client):
    info = store_client.create_table(
        TableSpec.model_validate(
            {"name": "orders", "schema": [{"name": "id", "type": "bigint"}], "primary_key": ["id"], "num_buckets": 2}
        )
    )
    store_client.upsert("orders", [{"id": i} for i in range(10)])
    snapshots = store_client.take_snapshots("orders").buckets
    ctx = context(tmp_path, store_client.url)
    lease = ctx.job_lease(ctx.planning_store())
    lease.acquire([SnapshotRef(info.table_id, s.bucket, s.snapshot_id, s.log_offset) for s in snapshots])
    registry = CollectorRegistry()
    seen = []
    observer = RoundObserver(ctx, lease, metrics=TieringMetrics(registry), listeners=[seen.append])

    with caplog.at_level(logging.INFO, logger="tiering.progress"):
        observer(outcome(info.table_id))

    lines = [r.getMessage() for r in caplog.records if r.name == "tiering.progress"]
    assert lines == [
        f"job=obs-job round=42 table=orders status=committed table_id={info.table_id} snapshot_buckets=1 "
        "log_buckets=2 changes=250 rows_written=900 written_by=executors offsets={0: 120, 1: 80} lag=15 "
        "delta_version=7 epoch=5 lease=obs-job-lease leased_snapshots=2",
        "job=obs-job round=42 table=users status=failed cause=commit state=written epoch=5 lease=obs-job-lease "
        "error=LakeCommitError: disk full",
    ]
    assert sample(registry, "kv_tiering_lake_offset", job="obs-job", table="orders") == 200
    assert sample(registry, "kv_tiering_lag_records", job="obs-job", table="orders") == 15
    assert sample(registry, "kv_tiering_rows_total", job="obs-job", table="orders") == 250
    assert sample(registry, "kv_tiering_splits_total", job="obs-job", table="orders") == 3
    assert sample(registry, "kv_tiering_lake_version", job="obs-job", table="orders") == 7
    assert sample(registry, "kv_tiering_leased_snapshots", job="obs-job", table="orders") == 2
    assert sample(registry, "kv_tiering_table_rounds_total", job="obs-job", table="users", outcome="failed") == 1
    assert sample(registry, "kv_tiering_table_failures_total", job="obs-job", table="users", cause="commit") == 1
    assert sample(registry, "kv_tiering_epoch", job="obs-job") == 5
    assert sample(registry, "kv_tiering_round", job="obs-job") == 42
    assert sample(registry, "kv_tiering_rounds_total", job="obs-job") == 1
    assert [o.round_id for o in seen] == [42]
    assert sample(registry, "kv_tiering_freshness_seconds", job="obs-job", table="orders") == 0, "nothing untiered"
    assert sample(registry, "kv_tiering_last_commit_timestamp_seconds", job="obs-job", table="orders") == 1_700_000_000
    assert sample(registry, "kv_tiering_table_consecutive_failures", job="obs-job", table="users") == 4
    assert sample(registry, "kv_tiering_table_dropped", job="obs-job", table="users") == 1
    assert sample(registry, "kv_tiering_table_dropped", job="obs-job", table="orders") == 0

    observer(outcome(info.table_id, positions={0: 0, 1: 0}, round_id=43))  # the lake lacks all 10 writes
    fresh = sample(registry, "kv_tiering_freshness_seconds", job="obs-job", table="orders")
    assert 0 < fresh < 120, fresh


def test_a_broken_store_does_not_fail_the_round(tmp_path, caplog, monkeypatch):
    """The hook asks the store (unreachable here) for the lease's holdings; it logs and goes on."""
    ctx = context(tmp_path)
    lease = ctx.job_lease(ReferenceStore(KvStoreClient("http://127.0.0.1:9", timeout_s=0.5)))
    seen = []
    observer = RoundObserver(ctx, lease, metrics=TieringMetrics(CollectorRegistry()), listeners=[seen.append])
    monkeypatch.setattr(retry, "STORE_RETRY", retry.instant(retry.STORE_RETRY))
    with caplog.at_level(logging.INFO):
        observer(outcome())

    assert [o.round_id for o in seen] == [42], "listeners still run"
    assert any("recording progress failed" in r.getMessage() for r in caplog.records)


def test_a_group_member_samples_the_tables_it_owns_at_their_table_epochs(tmp_path):
    group_file = tmp_path / "group-ownership.json"
    ctx = context(tmp_path, **{"job.group": "g"}).model_copy(update={"group_file": str(group_file)})
    registry = CollectorRegistry()
    TieringMetrics(registry).owned.track(ctx)
    assert sample(registry, "kv_tiering_table_epoch", job="obs-job", group="g", table="orders") is None, "none yet"

    OwnedTables("g", "obs-job", {"orders": 3, "users": 1}).write(group_file)
    assert sample(registry, "kv_tiering_table_epoch", job="obs-job", group="g", table="orders") == 3
    assert sample(registry, "kv_tiering_table_epoch", job="obs-job", group="g", table="users") == 1

    OwnedTables("g", "obs-job", {"users": 1}).write(group_file)  # orders moved to another member
    assert sample(registry, "kv_tiering_table_epoch", job="obs-job", group="g", table="orders") is None
    assert sample(registry, "kv_tiering_table_epoch", job="obs-job", group="g", table="users") == 1


def test_a_table_that_moved_away_leaves_no_failure_streak_behind(tmp_path, store_client):
    ctx = context(tmp_path, store_client.url, **{"job.group": "g"})
    registry = CollectorRegistry()
    observer = RoundObserver(ctx, ctx.job_lease(ctx.planning_store()), metrics=TieringMetrics(registry))
    stuck = TableHealth(table="users", table_id=9, consecutive_failures=3, last_failure="moved")
    observer(RoundOutcome(round_id=1, epoch=5, table_ids={"users": 9}, health={"users": stuck}))
    assert sample(registry, "kv_tiering_table_consecutive_failures", job="obs-job", table="users") == 3

    moved = TableFailure(FailureCause.MOVED, TableState.ACQUIRED, "TableMovedError", "job 'b' owns it")
    observer(RoundOutcome(round_id=2, epoch=5, table_ids={"users": 9}, failed={"users": moved}, health={}))

    assert sample(registry, "kv_tiering_table_consecutive_failures", job="obs-job", table="users") is None


def test_a_store_that_lists_no_holds_leaves_the_leased_count_unknown(tmp_path, caplog, store_client):
    """Fluss lists no lease's holds: the line says so and no sample is set, rather than a count of
    0 that reads as nothing held (the Fluss store asks its cluster nothing for that)."""
    from tiering.fluss.store import FlussStore

    ctx = context(tmp_path, store_client.url)
    lease = ctx.job_lease(FlussStore("127.0.0.1:9", "db", None))
    registry = CollectorRegistry()
    observer = RoundObserver(ctx, lease, metrics=TieringMetrics(registry))

    with caplog.at_level(logging.INFO, logger="tiering.progress"):
        observer(outcome())

    lines = [r.getMessage() for r in caplog.records if r.name == "tiering.progress"]
    assert lines[0].endswith("lease=obs-job-lease leased_snapshots=unknown"), lines
    assert sample(registry, "kv_tiering_leased_snapshots", job="obs-job", table="orders") is None
    assert sample(registry, "kv_tiering_lake_version", job="obs-job", table="orders") == 7, "the rest is recorded"


def test_a_run_logs_one_line_per_table_per_round_committed_or_failed(
    spark, kv_store, zk_hosts, unique_job, tmp_path, caplog
):
    """DESIGN §8: what the round and this hook log of a table, together, is one line a round: the
    committed table's with its numbers, the failed one's with its cause (a foreign append to its
    lake makes it fail before anything is written)."""
    client = kv_store.client()
    orders, users = TableOracle(client, "orders", num_buckets=2), TableOracle(client, "users", num_buckets=2)
    for t in (orders, users):
        t.upsert(range(20))
    conf = write_conf(
        tmp_path / "tiering.toml",
        job=unique_job,
        store_url=kv_store.url,
        zk_hosts=zk_hosts,
        trigger={"available_now": True},
    )
    config = load_config(conf, {})
    assert run_as_leader(config).ok
    users_lake = DeltaTable(Lake.of(config.lake).path("users"))
    rows = delta_rows(users_lake).slice(0, 1)
    write_deltalake(
        users_lake, rows.set_column(rows.schema.get_field_index("id"), "id", pa.array([99], pa.int64())), mode="append"
    )
    orders.upsert(range(20, 30))
    users.upsert(range(20, 30))

    with caplog.at_level(logging.INFO, logger="tiering"):
        assert list(run_as_leader(config).failed_tables) == ["users"]

    def by_round(table: str) -> dict[str, list[str]]:
        """The lines naming ``table``, by the round they name ("?": none)."""
        found: dict[str, list[str]] = {}
        for record in caplog.records:
            line = record.getMessage()
            if re.search(rf"\btable[= ]'?{table}\b", line):
                found.setdefault(next(iter(re.findall(r"\bround=(\d+)", line)), "?"), []).append(line)
        return found

    orders_lines, users_lines = by_round("orders"), by_round("users")
    assert [len(lines) for lines in orders_lines.values()] == [1], orders_lines
    assert "status=committed" in next(iter(orders_lines.values()))[0]
    assert users_lines and all(len(lines) == 1 for lines in users_lines.values()), users_lines
    assert all("status=failed cause=foreign_write" in lines[0] for lines in users_lines.values()), users_lines
