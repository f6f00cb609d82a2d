"""Whole-job failover with real drivers (issue 4): two `tiering run` processes on one job and one
checkpoint, a KV store taking writes the whole time, a ZooKeeper that elects them.

What each test kills and what must hold afterwards:
- the leader is SIGKILLed: the standby leads with the next epoch and the same lease id, and the
  lake ends equal to the test's oracle, nothing lost or duplicated; SIGTERM stops it cleanly;
- the leader is frozen (SIGSTOP) past its session timeout: the standby takes over; once thawed,
  the zombie commits nothing (no Delta commit of its epoch after the takeover) and exits non-zero
  naming the lost leadership;
- ZooKeeper stops for longer than the session timeout: the leader steps down on its own (exits
  non-zero: a supervisor restarts it), and once ZooKeeper is back the standby leads.
A ZooKeeper write by a stale leader failing its epoch check is covered by
tests/integration/coord/test_epoch_fencing.py::test_stale_leader_write_is_fenced.
"""

from __future__ import annotations

import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.failover.drivers import (
    Driver,
    Writer,
    lake_matches,
    seconds_since,
    tiering_commits,
    write_conf,
)
from tests.integration.pipeline.harness import TableOracle, assert_lake_equals, wait_until
from tiering.coord import read_status
from tiering.state.lease_file import load_or_create_lease_id

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

SESSION_S = 4.0
TABLES = ("orders", "users")
#: a driver's JVM takes 10-20 s to start on two cores; generous bounds, never the assertion itself
LEAD_TIMEOUT_S = 120.0


@pytest.fixture
def drivers(tmp_path: Path) -> Iterator[Callable[[Path], Driver]]:
    started: list[Driver] = []

    def start(conf: Path) -> Driver:
        driver = Driver(conf, tmp_path / f"driver-{len(started)}.log")
        started.append(driver)
        return driver

    yield start
    for driver in started:
        driver.reap()


@pytest.fixture
def oracles(kv_store) -> list[TableOracle]:
    client = kv_store.client()
    tables = [TableOracle(client, "orders", num_buckets=3), TableOracle(client, "users", num_buckets=2)]
    for t in tables:
        t.upsert(range(200))
        client.take_snapshots(t.name)
        t.churn(40, key_space=300)
    return tables


def committed(lake: Path, epoch: int) -> bool:
    """Every table has at least one tiering commit of ``epoch``."""
    return all(any(c.epoch == epoch for c in tiering_commits(lake, t)) for t in TABLES)


def lock_holder(driver: Driver) -> str:
    """How ZooKeeper's lock names a driver (JobElection's identifier)."""
    return f"{socket.gethostname()}:{driver.pid}"


def lead_with_standby(zk_hosts: str, job: str, conf: Path, lake: Path, drivers) -> tuple[Driver, Driver, int]:
    """Start a leader, wait for its first commits, then queue a standby behind it."""
    leader = drivers(conf)
    wait_until(lambda: (read_status(zk_hosts, job)["owner"] or {}).get("pid") == leader.pid,
               timeout_s=LEAD_TIMEOUT_S, what="the first driver to lead")
    epoch = read_status(zk_hosts, job)["epoch"]
    wait_until(lambda: committed(lake, epoch), timeout_s=LEAD_TIMEOUT_S, what=f"first commits of epoch {epoch}")
    standby = drivers(conf)
    wait_until(lambda: read_status(zk_hosts, job)["contenders"] == 2, timeout_s=30, what="the standby to queue")
    return leader, standby, epoch


def assert_stopped_cleanly(driver: Driver, client, job: str) -> None:
    driver.signal(signal.SIGTERM)
    assert driver.wait(60) == 0, driver.tail()
    assert f"job {job!r} stopped after" in driver.output()
    assert client.list_leases() == [], "a clean stop drops the lease"


def test_killed_leader_is_replaced_by_the_standby_with_the_next_epoch_and_the_same_lease(
    kv_store, zk_server, oracles, drivers, unique_job, tmp_path
):
    client, lake, zk = kv_store.client(), tmp_path / "lake", zk_server.hosts
    conf = write_conf(tmp_path, unique_job, kv_store.url, zk, SESSION_S)
    with Writer(oracles) as writer:
        leader, standby, epoch = lead_with_standby(zk, unique_job, conf, lake, drivers)
        status = read_status(zk, unique_job)
        assert status["leader"] == lock_holder(leader) and status["contenders"] == 2
        rounds_before = len(tiering_commits(lake, "orders"))
        wait_until(lambda: len(tiering_commits(lake, "orders")) >= rounds_before + 2, timeout_s=60,
                   what="two more rounds while the standby waits")
        assert {c.epoch for t in TABLES for c in tiering_commits(lake, t)} == {epoch}, "only the leader committed"
        assert "round=" not in standby.output(), "the standby planned or committed nothing"

        killed = time.monotonic()
        leader.signal(signal.SIGKILL)
        assert leader.wait(10) == -signal.SIGKILL
        wait_until(lambda: read_status(zk, unique_job)["epoch"] == epoch + 1, timeout_s=60, what="the next epoch")
        elected_s = seconds_since(killed)
        wait_until(lambda: committed(lake, epoch + 1), timeout_s=LEAD_TIMEOUT_S, what="the standby's first commits")
        first_commit_s = seconds_since(killed)
        writer.stop()

    status = read_status(zk, unique_job)
    assert status["owner"]["pid"] == standby.pid and status["contenders"] == 1
    wait_until(lambda: all(lake_matches(lake, o) for o in oracles), timeout_s=60, what="the lake to catch up")
    for oracle in oracles:
        assert_lake_equals(lake, oracle)
    lease_id = load_or_create_lease_id(str(tmp_path / "ckpt"), unique_job)
    commits = [c for t in TABLES for c in tiering_commits(lake, t)]
    assert {c.lease_id for c in commits} == {lease_id}, "both terms used the checkpoint's lease id"
    assert {c.epoch for c in commits} == {epoch, epoch + 1}
    assert client.get_lease(lease_id).epoch == epoch + 1
    assert {client.get_lake(t).epoch for t in TABLES} == {epoch + 1}
    print(f"\nSIGKILL takeover: elected after {elected_s}s, first commit after {first_commit_s}s, "
          f"{writer.batches} write batches, {len(commits)} commits")

    assert_stopped_cleanly(standby, client, unique_job)
    assert read_status(zk, unique_job)["contenders"] == 0, "a clean stop gives leadership back"


def test_frozen_leader_is_fenced_when_it_wakes_and_commits_nothing(
    kv_store, zk_server, oracles, drivers, unique_job, tmp_path
):
    client, lake, zk = kv_store.client(), tmp_path / "lake", zk_server.hosts
    conf = write_conf(tmp_path, unique_job, kv_store.url, zk, SESSION_S)
    with Writer(oracles) as writer:
        zombie, successor, epoch = lead_with_standby(zk, unique_job, conf, lake, drivers)
        frozen = time.monotonic()
        zombie.freeze()
        wait_until(lambda: committed(lake, epoch + 1), timeout_s=LEAD_TIMEOUT_S, what="the successor's first commits")
        takeover_s = seconds_since(frozen)
        takeover = {t: min(c.version for c in tiering_commits(lake, t) if c.epoch == epoch + 1) for t in TABLES}
        zombie.thaw()
        zombie_rc = zombie.wait(60)
        fenced_s = seconds_since(frozen) - takeover_s
        writer.stop()

    assert zombie_rc not in (0, -signal.SIGKILL), zombie.tail()
    last_line = zombie.output().strip().splitlines()[-1]
    assert last_line.startswith("tiering: ") and ("leadership" in last_line or "FENCED_EPOCH" in last_line), (
        f"the zombie's last word should name the lost leadership: {last_line!r}"
    )
    for table in TABLES:
        late = [c for c in tiering_commits(lake, table) if c.version > takeover[table] and c.epoch != epoch + 1]
        assert late == [], f"{table}: the zombie (epoch {epoch}) committed after the takeover: {late}"
    wait_until(lambda: all(lake_matches(lake, o) for o in oracles), timeout_s=60, what="the lake to catch up")
    for oracle in oracles:
        assert_lake_equals(lake, oracle)
    lease_id = load_or_create_lease_id(str(tmp_path / "ckpt"), unique_job)
    assert client.get_lease(lease_id).epoch == epoch + 1
    assert {client.get_lake(t).epoch for t in TABLES} == {epoch + 1}
    print(f"\nSIGSTOP takeover: successor committed {takeover_s}s after the freeze; "
          f"zombie exited {zombie_rc} {fenced_s}s after its thaw: {last_line}")

    assert_stopped_cleanly(successor, client, unique_job)


def test_leader_steps_down_when_zookeeper_is_gone_and_the_standby_leads_once_it_is_back(
    kv_store, zk_factory, oracles, drivers, unique_job, tmp_path
):
    client, lake = kv_store.client(), tmp_path / "lake"
    server = zk_factory()
    conf = write_conf(tmp_path, unique_job, kv_store.url, server.hosts, SESSION_S)
    with Writer(oracles) as writer:
        leader, standby, epoch = lead_with_standby(server.hosts, unique_job, conf, lake, drivers)
        down = time.monotonic()
        server.stop()
        leader_rc = leader.wait(60)
        stepped_down_s = seconds_since(down)
        assert standby.proc.poll() is None, f"the standby keeps waiting through the outage:\n{standby.tail()}"
        server.restart()
        restarted = time.monotonic()
        wait_until(lambda: committed(lake, epoch + 1), timeout_s=LEAD_TIMEOUT_S, what="the standby to lead and commit")
        resumed_s = seconds_since(restarted)
        writer.stop()

    assert leader_rc not in (0, -signal.SIGKILL), leader.tail()
    last_line = leader.output().strip().splitlines()[-1]
    assert last_line.startswith("tiering: ") and "leadership" in last_line, last_line
    assert read_status(server.hosts, unique_job)["owner"]["pid"] == standby.pid
    wait_until(lambda: all(lake_matches(lake, o) for o in oracles), timeout_s=60, what="the lake to catch up")
    for oracle in oracles:
        assert_lake_equals(lake, oracle)
    print(f"\nZooKeeper outage: leader exited {leader_rc} {stepped_down_s}s after ZooKeeper stopped "
          f"({last_line}); standby committed {resumed_s}s after the restart")

    assert_stopped_cleanly(standby, client, unique_job)
