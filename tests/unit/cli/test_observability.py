"""The per-round hook: one log line per table with the numbers an operator needs, and metrics."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import CollectorRegistry

from tiering.conf.loader import load_config
from tiering.kvstore import retry
from tiering.kvstore.client import KvStoreClient
from tiering.lake.committer import RoundOutcome
from tiering.lake.round_writer import TableCommit
from tiering.observability import RoundObserver, TieringMetrics, checkpoint_lease_id
from tiering.state.lease_file import lease_file_path, load_or_create_lease_id

pytestmark = pytest.mark.unit


def config(tmp_path):
    return load_config(None, {}, {
        "job.name": "obs-job",
        "job.checkpoint": str(tmp_path / "ckpt"),
        "kvstore.url": "http://127.0.0.1:9",
        "zookeeper.hosts": "127.0.0.1:9",
        "lake.root": str(tmp_path / "lake"),
    })


def outcome() -> RoundOutcome:
    orders = TableCommit(
        table="orders", table_id=3, delta_version=7, positions={0: 120, 1: 80}, skipped=False,
        bootstrap_buckets=(1,), log_buckets=(0, 1), rows_in=250, rows_out=900,
    )
    return RoundOutcome(round_id=42, committed={"orders": orders}, failed={"users": "LakeCommitError: disk full"},
                        lag={"orders": 15})


def sample(registry: CollectorRegistry, name: str, **labels) -> float | None:
    return registry.get_sample_value(name, labels)


def test_a_round_logs_one_line_per_table_and_sets_the_metrics(tmp_path, caplog):
    registry = CollectorRegistry()
    seen = []
    observer = RoundObserver(config(tmp_path), epoch=5, metrics=TieringMetrics(registry), listeners=[seen.append])

    with caplog.at_level(logging.INFO, logger="tiering.progress"):
        observer(outcome())

    lines = [r.getMessage() for r in caplog.records if r.name == "tiering.progress"]
    assert lines == [
        "job=obs-job round=42 table=orders status=committed splits=3 rows=250 offsets={0: 120, 1: 80} lag=15 "
        "delta_version=7 epoch=5 lease=None leased_snapshots=0",
        "job=obs-job round=42 table=users status=failed epoch=5 lease=None error=LakeCommitError: disk full",
    ]
    assert sample(registry, "kv_tiering_lake_offset", job="obs-job", table="orders") == 200
    assert sample(registry, "kv_tiering_lag_records", job="obs-job", table="orders") == 15
    assert sample(registry, "kv_tiering_rows_total", job="obs-job", table="orders") == 250
    assert sample(registry, "kv_tiering_splits_total", job="obs-job", table="orders") == 3
    assert sample(registry, "kv_tiering_lake_version", job="obs-job", table="orders") == 7
    assert sample(registry, "kv_tiering_table_rounds_total", job="obs-job", table="users", outcome="failed") == 1
    assert sample(registry, "kv_tiering_epoch", job="obs-job") == 5
    assert sample(registry, "kv_tiering_round", job="obs-job") == 42
    assert sample(registry, "kv_tiering_rounds_total", job="obs-job") == 1
    assert [o.round_id for o in seen] == [42]


def test_a_broken_store_does_not_fail_the_round(tmp_path, caplog, monkeypatch):
    """With a lease id the hook asks the store (unreachable here) for holdings; it logs and goes on."""
    cfg = config(tmp_path)
    load_or_create_lease_id(cfg.job.checkpoint, cfg.job.name)
    registry = CollectorRegistry()
    client = KvStoreClient("http://127.0.0.1:9", timeout_s=0.5)
    seen = []
    observer = RoundObserver(cfg, epoch=1, metrics=TieringMetrics(registry), client=client, listeners=[seen.append])
    monkeypatch.setattr(retry, "STORE_RETRY", retry.instant(retry.STORE_RETRY))
    with caplog.at_level(logging.INFO):
        observer(outcome())

    assert [o.round_id for o in seen] == [42], "listeners still run"
    assert any("recording progress failed" in r.getMessage() for r in caplog.records)


def test_checkpoint_lease_id_reads_but_never_creates(tmp_path):
    checkpoint = str(tmp_path / "ckpt")
    assert checkpoint_lease_id(checkpoint) is None
    assert not lease_file_path(checkpoint).exists()
    lease_id = load_or_create_lease_id(checkpoint, "obs-job")
    assert checkpoint_lease_id(checkpoint) == lease_id
