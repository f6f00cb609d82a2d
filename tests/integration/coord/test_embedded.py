"""The embedded ZooKeeper is a real server: it serves, stops, restarts with its data, and fails loudly."""

from __future__ import annotations

import os
import signal
import socket

import pytest
from kazoo.client import KazooClient

from tests.support.drivers import tiering_cli
from tiering.cli import EXIT_FAILURE
from tiering.coord.embedded import EmbeddedZooKeeper, _four_letter_word
from tiering.coord.epoch import bump_epoch, read_epoch
from tiering.errors import CoordinationError

pytestmark = pytest.mark.integration


def _client(hosts: str) -> KazooClient:
    zk = KazooClient(hosts=hosts, timeout=4.0)
    zk.start(timeout=10)
    return zk


def test_serves_on_loopback_then_stops(zk_factory):
    server = zk_factory()
    assert server.hosts == f"127.0.0.1:{server.port}"
    assert _four_letter_word(server.port, b"ruok") == b"imok"
    assert b"Mode: standalone" in _four_letter_word(server.port, b"srvr")
    zk = _client(server.hosts)
    zk.create("/probe", b"v1")
    assert zk.get("/probe")[0] == b"v1"
    zk.stop()
    pid = server.pid
    server.stop()
    assert not server.is_running()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(OSError):
        _four_letter_word(server.port, b"ruok")
    assert "binding to port" in server.log_path.read_text()


def test_epoch_survives_restart_and_sigkill(zk_factory):
    server = zk_factory()
    zk = _client(server.hosts)
    assert [bump_epoch(zk, "orders").value for _ in range(3)] == [1, 2, 3]
    zk.stop()
    port = server.port

    server.restart()
    assert server.port == port
    zk = _client(server.hosts)
    assert read_epoch(zk, "orders").value == 3
    zk.stop()

    server.kill(signal.SIGKILL)
    server.start(server.data_dir, port)
    zk = _client(server.hosts)
    assert read_epoch(zk, "orders").value == 3
    assert bump_epoch(zk, "orders").value == 4
    zk.stop()


def test_port_in_use_fails_with_log_tail(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = EmbeddedZooKeeper()
        with pytest.raises(CoordinationError) as failure:
            server.start(tmp_path, port, timeout_s=30)
    assert f"127.0.0.1:{port}" in str(failure.value)
    assert "another process listens there" in str(failure.value)
    assert not server.is_running()


def test_tiering_zk_on_a_taken_port_names_it_and_claims_nothing(zk_server, tmp_path):
    """Another ZooKeeper on the port answers the serving probe: no "serving" line may follow."""
    result = tiering_cli("zk", "--port", str(zk_server.port), "--data-dir", str(tmp_path / "zk"))

    assert result.returncode == EXIT_FAILURE, result.stderr[-2000:]
    assert result.stdout == "", "no address is printed for a server that does not serve"
    assert result.stderr.splitlines() == [
        f"tiering: embedded ZooKeeper cannot listen at 127.0.0.1:{zk_server.port}: another process listens "
        "there; choose a free port with --port"
    ]
