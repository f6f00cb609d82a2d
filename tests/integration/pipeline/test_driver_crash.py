"""A real `tiering run` driver SIGKILLed at exact points of a round, then restarted.

Each kill happens inside the driver process at a named failpoint (tiering.failpoints), so the
test knows where the round stood: after the lease was acquired but before the Delta commit,
or after the Delta commit but before Spark's commit log. The restart is the next driver's
leader loop (``run_as_leader``) in the test process, on the session's SparkSession: it reads
the crashed driver's checkpoint like a new process would (a restart in a new process is
`tests/chaos` and the spark-submit tests' part), without a second JVM start per test. Both lake
writers are killed and replayed (delta-spark where the Delta jars are on the classpath).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from tests.support.config import write_conf
from tests.support.delta_spark import delta_spark_conf
from tests.support.drivers import run_driver
from tests.support.oracle import TableOracle, assert_lake_equals
from tests.support.waiting import wait_until
from tiering.conf.loader import load_config
from tiering.conf.model import TieringConfig
from tiering.errors import SnapshotUnavailableError
from tiering.failpoints import fired
from tiering.job import run_as_leader
from tiering.state.lease_file import load_or_create_lease_id

pytestmark = pytest.mark.integration


def crash_conf(tmp_path: Path, store_url: str, zk_hosts: str, lease_s: float = 60.0, writer: str = "delta-rs") -> Path:
    return write_conf(
        tmp_path / "tiering.toml",
        job="crash-job",
        store_url=store_url,
        zk_hosts=zk_hosts,
        zookeeper={"session_timeout_s": 4.0},
        lease={"duration_s": lease_s},
        lake={"writer": writer},
        spark={
            "spark.master": "local[2]",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "4",
            **delta_spark_conf(),
        },
    )


def crashed_at(conf: Path, failpoint: str) -> None:
    """Run the driver armed with ``failpoint``: it must have died there, by SIGKILL."""
    rc, out = run_driver(conf, failpoint=failpoint, timeout_s=240)
    assert rc == -signal.SIGKILL and fired(failpoint) in out, f"exit {rc}, {failpoint} not fired:\n{out[-3000:]}"


def restarted(conf: Path) -> TieringConfig:
    """The config `tiering run --conf <conf> --available-now` builds."""
    return load_config(conf, env={}, overrides={"trigger.available_now": True})


@pytest.fixture
def tables(kv_store):
    client = kv_store.client()
    orders = TableOracle(client, "orders", num_buckets=3)
    users = TableOracle(client, "users", num_buckets=2)
    for t in (orders, users):
        t.upsert(range(150))
        client.take_snapshots(t.name)
        t.churn(60, key_space=200)
    return orders, users


def test_killed_before_the_delta_commit_replays_the_round_with_the_same_lease(
    spark, kv_store, zk_server, tables, lake_writer, tmp_path
):
    client = kv_store.client()
    conf = crash_conf(tmp_path, kv_store.url, zk_server.hosts, writer=lake_writer)

    crashed_at(conf, "before_delta_commit")
    lease_id = load_or_create_lease_id(str(tmp_path / "ckpt"), "crash-job")
    held = client.list_leases()
    assert [lease.lease_id for lease in held] == [lease_id] and held[0].snapshots, (
        "the crashed round's snapshots stay leased"
    )
    assert not (tmp_path / "lake" / "orders" / "_delta_log").exists(), "nothing reached the lake"

    assert run_as_leader(restarted(conf)).ok
    for t in tables:
        assert_lake_equals(tmp_path / "lake", t)
    assert load_or_create_lease_id(str(tmp_path / "ckpt"), "crash-job") == lease_id
    assert client.list_leases() == [], "released after the replay, dropped at the clean stop"


def test_killed_after_the_delta_commit_skips_the_replayed_round(
    spark, kv_store, zk_server, tables, lake_writer, tmp_path
):
    client = kv_store.client()
    conf = crash_conf(tmp_path, kv_store.url, zk_server.hosts, writer=lake_writer)

    crashed_at(conf, "after_delta_commit")
    committed = {t.name: _version(tmp_path / "lake" / t.name) for t in tables}
    assert any(v is not None for v in committed.values()), "killed right after a table's commit"

    assert run_as_leader(restarted(conf)).ok
    for t in tables:
        assert_lake_equals(tmp_path / "lake", t)
        if committed[t.name] is not None:
            assert _version(tmp_path / "lake" / t.name) == committed[t.name], f"{t.name}: the replay committed again"
            report = client.get_lake(t.name)
            assert report is not None and report.lake_version == committed[t.name], "the missed store report is made up"
    assert client.list_leases() == []


def _version(path: Path) -> int | None:
    try:
        return DeltaTable(str(path)).version()
    except TableNotFoundError:
        return None


def test_after_a_crash_the_lease_expires_and_the_replay_bootstraps_from_a_fresh_snapshot(
    spark, store_factory, zk_server, tmp_path
):
    store = store_factory(num_retained=1, gc_interval_s=0.2)
    client = store.client()
    orders = TableOracle(client, "orders", num_buckets=3)
    orders.upsert(range(150))
    first = {s.bucket: s.snapshot_id for s in client.take_snapshots("orders").buckets}
    conf = crash_conf(tmp_path, store.url, zk_server.hosts, lease_s=3.0)

    crashed_at(conf, "before_delta_commit")
    assert len(client.list_leases()) == 1
    wait_until(lambda: client.list_leases() == [], timeout_s=20, what="the crashed driver's lease to expire")

    orders.churn(40, key_space=200)
    client.take_snapshots("orders")

    def collected() -> bool:
        try:
            client.get_snapshot("orders", 0, first[0])
        except SnapshotUnavailableError:
            return True
        return False

    wait_until(collected, timeout_s=20, what="GC of the crashed round's snapshot")
    assert run_as_leader(restarted(conf)).ok
    assert_lake_equals(tmp_path / "lake", orders)
    assert client.list_leases() == []
