"""The reference store's process as the tests and the demo start it: a port another process took
between the pick and the bind costs a second pick, not the start."""

from __future__ import annotations

import socket

import pytest

from tiering.errors import StoreUnavailableError
from tiering.kvstore.server import process
from tiering.kvstore.server.process import StoreProcess
from tiering.ports import free_port

pytestmark = pytest.mark.integration


def test_a_picked_port_taken_before_the_bind_is_picked_again(tmp_path, monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        picks = iter([taken.getsockname()[1], free_port()])
        monkeypatch.setattr(process, "free_port", lambda: next(picks))

        store = StoreProcess.start(tmp_path / "kv")
        try:
            assert store.port != taken.getsockname()[1]
            assert store.client().health()
            assert "address already in use" in (tmp_path / "kv" / "store.log").read_text()
            assert "Traceback" not in (tmp_path / "kv" / "store.log").read_text(), "the failed start left no crash"
        finally:
            store.stop()


def test_a_port_asked_for_and_taken_fails_the_start_naming_it(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        with pytest.raises(StoreUnavailableError, match=f"while starting on port {port}"):
            StoreProcess.start(tmp_path / "kv", port=port)
