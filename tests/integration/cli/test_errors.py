"""Every error a `tiering` command can hit ends in one line naming the file, key or object, and
an exit code for scripts (1 runtime, 2 configuration) — never a traceback, never a write."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.config import write_conf
from tests.support.drivers import tiering_cli
from tests.support.oracle import TableOracle
from tiering.cli import EXIT_FAILURE, EXIT_USAGE
from tiering.ports import free_port
from tiering.state.lease_file import load_or_create_lease_id

pytestmark = pytest.mark.integration

#: ZooKeeper sessions of these drivers: short, an unreachable server is named quickly.
SHORT_SESSION = {"session_timeout_s": 2.0}


def errors_conf(tmp_path, store_url: str, zk_hosts: str, **sections: dict):
    """The config of a job named ``errors``, whose ZooKeeper sessions are short."""
    return write_conf(
        tmp_path / "tiering.toml",
        job="errors",
        store_url=store_url,
        zk_hosts=zk_hosts,
        zookeeper=SHORT_SESSION,
        **sections,
    )


def assert_one_clear_line(result: subprocess.CompletedProcess, code: int, *named: str) -> None:
    assert result.returncode == code, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    message = result.stderr[result.stderr.index("tiering: ") :]
    for name in named:
        assert name in message, result.stderr[-2000:]


@pytest.mark.parametrize(
    "command", [["status"], ["leases", "list"], ["leases", "drop"], ["run", "--available-now"]], ids=" ".join
)
def test_a_malformed_lease_file_is_named_and_left_as_it_was(kv_store, zk_server, tmp_path, command):
    TableOracle(kv_store.client(), "orders", num_buckets=1)
    conf = errors_conf(tmp_path, kv_store.url, zk_server.hosts)
    lease_file = tmp_path / "ckpt" / "tiering" / "lease.json"
    lease_file.parent.mkdir(parents=True)
    lease_file.write_text("{not json")

    result = tiering_cli(*command, "--conf", str(conf))

    assert_one_clear_line(result, EXIT_FAILURE, str(lease_file))
    assert lease_file.read_text() == "{not json"
    assert not (tmp_path / "lake").exists()


def test_an_unsupported_lake_root_is_refused_before_anything_is_written(kv_store, tmp_path):
    """Refused before the driver even asks ZooKeeper (which is not running here) or the store (which has
    no table here)."""
    conf = write_conf(
        tmp_path / "tiering.toml",
        job="errors",
        store_url=kv_store.url,
        zk_hosts=f"127.0.0.1:{free_port()}",
        zookeeper=SHORT_SESSION,
    )
    conf.write_text(conf.read_text().replace(str(tmp_path / "lake"), "hdfs://namenode/lake"))

    result = tiering_cli("run", "--conf", str(conf), "--available-now")

    assert_one_clear_line(result, EXIT_USAGE, "lake.root", "hdfs://namenode/lake")
    assert not (tmp_path / "ckpt").exists()


def test_an_unreachable_store_is_named(zk_server, tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    conf = errors_conf(tmp_path, url, zk_server.hosts)

    result = tiering_cli("status", "--conf", str(conf))

    assert_one_clear_line(result, EXIT_FAILURE, f"KV store at {url} unreachable")


def test_a_checkpoint_of_another_job_is_refused_at_start_naming_that_job_committing_nothing(
    kv_store, zk_server, tmp_path
):
    """Two jobs on one checkpoint would share its lease and fence each other."""
    TableOracle(kv_store.client(), "orders", num_buckets=2).upsert(range(20))
    checkpoint = tmp_path / "ckpt"
    load_or_create_lease_id(str(checkpoint), "orders-tiering")
    lease_file = checkpoint / "tiering" / "lease.json"
    before = lease_file.read_bytes()
    conf = errors_conf(tmp_path, kv_store.url, zk_server.hosts)

    result = tiering_cli("run", "--conf", str(conf), "--available-now")

    assert_one_clear_line(result, EXIT_USAGE, "job.checkpoint", str(checkpoint), "belongs to job 'orders-tiering'")
    assert lease_file.read_bytes() == before and [p.name for p in checkpoint.iterdir()] == ["tiering"]
    assert not (tmp_path / "lake").exists()


def test_an_available_now_run_that_selects_no_table_names_the_patterns(kv_store, zk_server, tmp_path):
    """A typo in ``[tables] include`` would tier nothing, run after scheduled run, each exiting 0."""
    TableOracle(kv_store.client(), "payments", num_buckets=1)
    conf = errors_conf(tmp_path, kv_store.url, zk_server.hosts, tables={"include": ["paymnets"]})

    result = tiering_cli("run", "--conf", str(conf), "--available-now")

    assert_one_clear_line(result, EXIT_USAGE, "tables.include: 'paymnets' matches no table", "which has 1: payments")
    assert not (tmp_path / "ckpt").exists() and not (tmp_path / "lake").exists()


def test_an_available_now_run_with_the_store_down_fails_at_once_naming_it(store_factory, zk_server, tmp_path):
    """No minutes of retries and no Spark traceback: the line `tiering check` prints."""
    store = store_factory()
    conf = errors_conf(tmp_path, store.url, zk_server.hosts)
    store.stop()

    result = tiering_cli("run", "--conf", str(conf), "--available-now")

    assert_one_clear_line(result, EXIT_FAILURE, f"KV store at {store.url} unreachable", "Connection refused")
    assert result.stderr.count("\n") == 1, result.stderr[-2000:]
    assert not (tmp_path / "ckpt").exists() and not (tmp_path / "lake").exists()
