"""A term in one process: standby waits, unreachable ZooKeeper fails clearly, and a leader cut
off from a frozen ZooKeeper steps down on its own (watchdog), before kazoo could say LOST."""

from __future__ import annotations

import logging
import signal
import socket
import threading
import time

import pytest

from tests.support.tcp_proxy import TcpProxy
from tiering.coord import acquire_leadership, read_status
from tiering.coord.embedded import EmbeddedZooKeeper
from tiering.coord.paths import epoch_path
from tiering.coord.start_grace import StartGrace
from tiering.errors import ConfigError, CoordinationError, LeadershipLostError

pytestmark = pytest.mark.integration

SESSION_S = 2.0


def test_standby_waits_until_the_leader_resigns(zk_hosts, unique_job):
    leader = acquire_leadership(zk_hosts, unique_job, SESSION_S)
    with pytest.raises(CoordinationError, match=f"job '{unique_job}' is led by someone else"):
        acquire_leadership(zk_hosts, unique_job, SESSION_S, timeout_s=0.5)

    won: list = []
    standby = threading.Thread(target=lambda: won.append(acquire_leadership(zk_hosts, unique_job, SESSION_S)))
    standby.start()
    time.sleep(0.5)
    assert won == [] and read_status(zk_hosts, unique_job).contenders == 2
    leader.resign()
    standby.join(10)
    assert [t.epoch for t in won] == [leader.epoch + 1]
    assert leader.refusal is None
    with pytest.raises(LeadershipLostError) as refused:
        leader.check()
    assert leader.refusal == str(refused.value)  # kept: a query failing on it is a leadership loss
    won[0].check()
    assert won[0].refusal is None
    won[0].resign()


def test_unreachable_zookeeper_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        hosts = f"127.0.0.1:{s.getsockname()[1]}"  # nothing listens there
    started = time.monotonic()
    with pytest.raises(CoordinationError, match=f"cannot connect to ZooKeeper at {hosts} within 2s"):
        acquire_leadership(hosts, "orders", SESSION_S, connect_timeout_s=2)
    assert time.monotonic() - started < 10


def test_bad_job_name_is_refused(zk_hosts):
    with pytest.raises(ConfigError, match="'a/b'"):
        acquire_leadership(zk_hosts, "a/b", SESSION_S)


def test_frozen_zookeeper_makes_the_leader_step_down(zk_factory, unique_job):
    server = zk_factory()
    callbacks: list[str] = []
    called = threading.Event()

    def on_lost() -> None:
        callbacks.append(threading.current_thread().name)
        called.set()

    term = acquire_leadership(server.hosts, unique_job, SESSION_S, on_lost=on_lost)
    term.fenced_set(f"/tiering/jobs/{unique_job}/state", b"before")

    server.kill(signal.SIGSTOP)
    frozen_at = time.monotonic()
    try:
        assert term.lost.wait(6 * SESSION_S), "watchdog did not declare the term lost"
        stepped_down_s = time.monotonic() - frozen_at
        # A frozen server cannot tell kazoo the session expired: this is the SUSPENDED timer.
        assert term.lost_reason.startswith("disconnected from ZooKeeper")
        assert SESSION_S <= stepped_down_s < 3 * SESSION_S
        assert called.wait(5) and callbacks == [f"zk-watchdog-{unique_job}"]
        with pytest.raises(LeadershipLostError, match="lost"):
            term.fenced_set(f"/tiering/jobs/{unique_job}/state", b"while frozen")
        with pytest.raises(LeadershipLostError):
            term.check()
    finally:
        server.kill(signal.SIGCONT)

    successor = acquire_leadership(server.hosts, unique_job, SESSION_S, timeout_s=30)
    assert successor.epoch == term.epoch + 1
    status = read_status(server.hosts, unique_job)
    assert status.epoch == successor.epoch and status.contenders == 1
    term.resign()
    successor.resign()
    assert callbacks == [f"zk-watchdog-{unique_job}"]  # resign does not call on_lost


def test_a_leader_steps_down_by_the_session_timeout_the_server_granted_not_the_configured_one(
    tmp_path, unique_job, caplog
):
    # the server caps sessions at 2 s: a leader asking for 20 s is expired after 2 s of silence
    server = EmbeddedZooKeeper(max_session_timeout_ms=2_000).start(tmp_path / "zk")
    try:
        with caplog.at_level(logging.WARNING, logger="tiering.coord.leader"):
            term = acquire_leadership(server.hosts, unique_job, 20.0)
        assert term.session_timeout_s == 2.0
        assert any("granted a 2.0s session timeout, not the 20.0s configured" in r.getMessage() for r in caplog.records)
        assert StartGrace.of_session(term.session_timeout_s) == StartGrace(quiet_s=0.4, max_s=2.0)

        server.kill(signal.SIGSTOP)
        try:
            # by the granted 2 s it steps down ~3.3 s after its last contact; by the asked 20 s, ~21 s
            assert term.lost.wait(12.0), "the leader kept its term past the session the server granted"
            assert term.lost_reason.endswith("(> 2.0s session timeout)")
        finally:
            server.kill(signal.SIGCONT)
        term.resign()
    finally:
        server.stop()


def test_a_connection_blip_during_the_term_check_keeps_a_term_whose_session_survived(zk_hosts, unique_job):
    proxy = TcpProxy(zk_hosts).start()
    try:
        term = acquire_leadership(proxy.hosts, unique_job, 6.0)
        session = term.zk.client_id
        outcome: list[BaseException | None] = []

        def check_term() -> None:
            try:
                term.check()
                outcome.append(None)
            except BaseException as e:  # noqa: BLE001 - the outcome is what the test looks at
                outcome.append(e)

        proxy.hold()
        asking = threading.Thread(target=check_term)
        asking.start()
        proxy.wait_held(epoch_path(unique_job).encode())  # the term check's read is in flight: cut it
        proxy.cut()
        asking.join(30)

        assert outcome == [None], "the term check refused a term whose session survived the blip"
        assert term.zk.client_id == session and not term.lost.is_set() and term.refusal is None
        term.fenced_set(f"/tiering/jobs/{unique_job}/state", b"after the blip")
        term.resign()
    finally:
        proxy.stop()
