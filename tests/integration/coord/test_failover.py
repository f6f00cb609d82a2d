"""Failover between real leader processes (docs/DESIGN.md §7, §9): a SIGKILLed leader is replaced by
the standby with the next epoch; a SIGSTOPped one is replaced too, and once resumed it learns
it lost and its fenced writes are refused, so the successor's data stands."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tiering.coord import read_status

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

SESSION_S = 2.0
REPO = Path(__file__).resolve().parents[3]


class Contender:
    """A ``tests.support.contender`` process and the JSON events it prints."""

    def __init__(self, hosts: str, job: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.contender", hosts, job, str(SESSION_S)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.pid = self.proc.pid
        self.events: queue.Queue[dict] = queue.Queue()
        self.seen: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.events.put(json.loads(line))

    def wait_for(self, event: str, timeout_s: float) -> dict:
        deadline = time.monotonic() + timeout_s
        for seen in self.seen:
            if seen["event"] == event:
                return seen
        while (left := deadline - time.monotonic()) > 0:
            try:
                got = self.events.get(timeout=left)
            except queue.Empty:
                break
            self.seen.append(got)
            if got["event"] == event:
                return got
        raise AssertionError(f"contender {self.pid} printed no {event!r} within {timeout_s}s; saw {self.seen}")

    def drain(self) -> list[dict]:
        while True:
            try:
                self.seen.append(self.events.get_nowait())
            except queue.Empty:
                return self.seen

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGCONT)
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def contenders():
    started: list[Contender] = []

    def start(hosts: str, job: str) -> Contender:
        started.append(Contender(hosts, job))
        return started[-1]

    yield start
    for c in started:
        c.kill()


def _data(hosts: str, job: str) -> str:
    zk = KazooClient(hosts=hosts, timeout=SESSION_S)
    zk.start(timeout=10)
    try:
        return zk.get(f"/tiering/jobs/{job}/data")[0].decode()
    finally:
        zk.stop()
        zk.close()


def test_sigkilled_leader_is_replaced_with_the_next_epoch(zk_hosts, unique_job, contenders):
    first = contenders(zk_hosts, unique_job)
    led = first.wait_for("leader", 20)
    second = contenders(zk_hosts, unique_job)
    second.wait_for("waiting", 20)
    time.sleep(1.0)
    assert [e for e in second.drain() if e["event"] == "leader"] == []
    status = read_status(zk_hosts, unique_job)
    assert status.owner["pid"] == first.pid and status.contenders == 2

    killed_at = time.monotonic()
    first.proc.send_signal(signal.SIGKILL)
    took_over = second.wait_for("leader", 8 * SESSION_S)
    failover_s = time.monotonic() - killed_at
    assert took_over["epoch"] == led["epoch"] + 1
    assert failover_s < 4 * SESSION_S
    time.sleep(0.3)
    assert _data(zk_hosts, unique_job).startswith(f"{second.pid}:{took_over['epoch']}:")
    status = read_status(zk_hosts, unique_job)
    assert (status.owner["pid"], status.epoch, status.contenders) == (second.pid, took_over["epoch"], 1)


def test_sigstopped_leader_is_fenced_after_it_resumes(zk_hosts, unique_job, contenders):
    first = contenders(zk_hosts, unique_job)
    led = first.wait_for("leader", 20)
    second = contenders(zk_hosts, unique_job)
    second.wait_for("waiting", 20)
    time.sleep(0.5)

    os.kill(first.pid, signal.SIGSTOP)
    took_over = second.wait_for("leader", 8 * SESSION_S)
    assert took_over["epoch"] == led["epoch"] + 1
    time.sleep(0.5)
    os.kill(first.pid, signal.SIGCONT)

    lost = first.wait_for("lost", 4 * SESSION_S)
    assert lost["reason"]
    assert first.wait_for("on_lost", 1)["pid"] == first.pid
    refused = first.wait_for("write_after_lost", 5)
    assert refused["error"] == "LeadershipLostError"
    failed = [e["error"] for e in first.drain() if e["event"] == "write_failed"]
    assert set(failed) <= {"FencedEpochError", "LeadershipLostError", "CoordinationError"}
    assert first.proc.wait(10) == 0

    # No write of the old term landed after the new one began: the successor's value stands.
    time.sleep(0.3)
    assert _data(zk_hosts, unique_job).startswith(f"{second.pid}:{took_over['epoch']}:")
    assert read_status(zk_hosts, unique_job).owner["pid"] == second.pid
