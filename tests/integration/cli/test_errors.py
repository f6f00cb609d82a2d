"""Every error a `tiering` command can hit ends in one line naming the file, key or object, and
an exit code for scripts (1 runtime, 2 configuration) — never a traceback, never a write."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import tomli_w

from tests.integration.pipeline.harness import tiering_cli
from tiering.cli import EXIT_FAILURE, EXIT_USAGE
from tiering.kvstore.server.process import free_port

pytestmark = pytest.mark.integration


def write_conf(tmp_path: Path, store_url: str, zk_hosts: str, **lake) -> Path:
    conf = tmp_path / "tiering.toml"
    conf.write_bytes(tomli_w.dumps({
        "job": {"name": "errors", "checkpoint": str(tmp_path / "ckpt")},
        "kvstore": {"url": store_url},
        "zookeeper": {"hosts": zk_hosts, "session_timeout_s": 2.0},
        "lake": {"root": str(tmp_path / "lake"), **lake},
    }).encode())
    return conf


def assert_one_clear_line(result: subprocess.CompletedProcess, code: int, *named: str) -> None:
    assert result.returncode == code, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    message = result.stderr[result.stderr.index("tiering: "):]
    for name in named:
        assert name in message, result.stderr[-2000:]


@pytest.mark.parametrize("command", [["status"], ["leases", "list"], ["leases", "drop"], ["run", "--available-now"]],
                         ids=" ".join)
def test_a_malformed_lease_file_is_named_and_left_as_it_was(kv_store, zk_server, tmp_path, command):
    conf = write_conf(tmp_path, kv_store.url, zk_server.hosts)
    lease_file = tmp_path / "ckpt" / "tiering" / "lease.json"
    lease_file.parent.mkdir(parents=True)
    lease_file.write_text("{not json")

    result = tiering_cli(*command, "--conf", str(conf))

    assert_one_clear_line(result, EXIT_FAILURE, str(lease_file))
    assert lease_file.read_text() == "{not json"
    assert not (tmp_path / "lake").exists()


def test_an_unsupported_lake_root_is_refused_before_anything_is_written(kv_store, tmp_path):
    """Refused before the driver even asks ZooKeeper (which is not running here)."""
    conf = write_conf(tmp_path, kv_store.url, f"127.0.0.1:{free_port()}")
    conf.write_text(conf.read_text().replace(str(tmp_path / "lake"), "hdfs://namenode/lake"))

    result = tiering_cli("run", "--conf", str(conf), "--available-now")

    assert_one_clear_line(result, EXIT_USAGE, "lake.root", "hdfs://namenode/lake")
    assert not (tmp_path / "ckpt").exists()


def test_an_unreachable_store_is_named(zk_server, tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    conf = write_conf(tmp_path, url, zk_server.hosts)

    result = tiering_cli("status", "--conf", str(conf))

    assert_one_clear_line(result, EXIT_FAILURE, f"KV store at {url} unreachable")
