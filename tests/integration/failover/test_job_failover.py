"""Whole-job failover with real drivers: `tiering run` processes on one job and one
checkpoint, a KV store taking writes the whole time, an embedded ZooKeeper electing them.

One test walks through the failures in turn, each new leader's successor queued as its standby,
because every takeover starts a driver JVM (30+ s on two cores):
1. two drivers: one leads and commits, the other waits; the leader is SIGKILLed and the standby
   leads with the next epoch and the same lease id;
2. that leader is frozen (SIGSTOP of its whole process group) past its session timeout: the next
   standby takes over; thawed, the zombie commits nothing to Delta and exits non-zero naming the
   lost leadership;
3. ZooKeeper stops for longer than the session timeout: the leader steps down by itself (exits
   non-zero; a supervisor restarts it), the standby survives the outage and leads once
   ZooKeeper is back;
4. a standby is stopped with SIGINT and the last leader with SIGTERM: both exit 0 and leave the
   election, the leader drops the lease.
Throughout, and at the end, the lake must equal the test's oracle: nothing lost or duplicated.
The lake is delta-rs's: delta-spark is refused where two drivers can reach the lake, as they do
here (``lake.delta_spark_single_driver``, docs/DESIGN.md §6).
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

from tests.support.config import SPARK_LOCAL, write_conf
from tests.support.drivers import Driver
from tests.support.lake import tiering_commits
from tests.support.oracle import TableOracle, assert_lake_equals, lake_matches
from tests.support.running import Writers
from tests.support.waiting import wait_until
from tiering.coord import read_status
from tiering.errors import LeaseNotFoundError
from tiering.state.lease_file import load_or_create_lease_id

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

SESSION_S = 4.0
TABLE = "orders"
#: bounds for a new leader's JVM start plus a round or two on two busy cores; never the assertion
LEAD_TIMEOUT_S = 150.0


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


class Job:
    """What the test watches: ZooKeeper's view of the job and the Delta history of its table."""

    def __init__(self, zk_hosts: str, name: str, lake: Path) -> None:
        self.zk_hosts, self.name, self.lake = zk_hosts, name, lake

    def status(self) -> dict:
        return read_status(self.zk_hosts, self.name)

    def epochs(self) -> list[int]:
        return [c.epoch for c in tiering_commits(self.lake, TABLE)]

    def wait_owner(self, driver: Driver, timeout_s: float = LEAD_TIMEOUT_S) -> int:
        """Wait until ``driver`` has won the election; return its epoch."""
        wait_until(
            lambda: (self.status().owner or {}).get("pid") == driver.pid,
            timeout_s=timeout_s,
            what=f"driver {driver.pid} to lead",
        )
        return self.status().epoch

    def wait_commits(self, epoch: int, n: int = 1) -> None:
        wait_until(
            lambda: self.epochs().count(epoch) >= n, timeout_s=LEAD_TIMEOUT_S, what=f"{n} commit(s) of epoch {epoch}"
        )

    def wait_contenders(self, n: int) -> None:
        wait_until(lambda: self.status().contenders == n, timeout_s=30, what=f"{n} contenders")


def last_word(driver: Driver) -> str:
    """The CLI's closing message (Spark's shutdown logs may follow it)."""
    said = [line for line in driver.output().splitlines() if line.startswith("tiering: ")]
    assert said, f"driver {driver.pid} exited without a message:\n{driver.tail()}"
    return said[-1]


def test_the_job_survives_a_killed_leader_a_zombie_and_a_zookeeper_outage(
    kv_store, zk_factory, drivers, unique_job, tmp_path
):
    client, lake, zk = kv_store.client(), tmp_path / "lake", zk_factory()
    oracle = TableOracle(client, TABLE, num_buckets=3)
    oracle.upsert(range(200))
    client.take_snapshots(TABLE)
    conf = write_conf(  # continuous: a round every second
        tmp_path / "tiering.toml",
        job=unique_job,
        store_url=kv_store.url,
        zk_hosts=zk.hosts,
        zookeeper={"session_timeout_s": SESSION_S},
        trigger={"available_now": False, "interval_s": 1.0},
        lease={"duration_s": 120.0},
        spark={**SPARK_LOCAL, "spark.driver.memory": "512m"},
    )
    job = Job(zk.hosts, unique_job, lake)
    measured: dict[str, float] = {}
    started = time.monotonic()

    with Writers([oracle], key_space=300, batch=5, every_s=1.0) as writer:
        # 1. Two drivers: one leads, one waits; the leader is SIGKILLed.
        first = drivers(conf)
        e1 = job.wait_owner(first)
        standby = drivers(conf)
        job.wait_contenders(2)
        assert job.status().leader == f"{socket.gethostname()}:{first.pid}"
        job.wait_commits(e1)
        assert set(job.epochs()) == {e1}, "only the leader commits"
        assert "round=" not in standby.output(), "the standby plans and commits nothing"

        killed = time.monotonic()
        first.signal(signal.SIGKILL)
        assert first.wait(10) == -signal.SIGKILL
        second = standby
        e2 = job.wait_owner(second, timeout_s=30)
        measured["sigkill: elected"] = time.monotonic() - killed
        assert e2 == e1 + 1
        standby = drivers(conf)
        job.wait_commits(e2)
        measured["sigkill: first commit"] = time.monotonic() - killed

        # 2. The leader freezes past its session timeout; the standby takes over; it thaws.
        frozen = time.monotonic()
        second.freeze()
        third = standby
        e3 = job.wait_owner(third, timeout_s=60)
        measured["sigstop: elected"] = time.monotonic() - frozen
        assert e3 == e2 + 1
        standby = drivers(conf)  # step 3's
        job.wait_commits(e3)
        measured["sigstop: first commit"] = time.monotonic() - frozen
        takeover = min(c.version for c in tiering_commits(lake, TABLE) if c.epoch == e3)
        thawed = time.monotonic()
        second.thaw()
        zombie_rc = second.wait(60)
        measured["zombie: exit after thaw"] = time.monotonic() - thawed
        assert zombie_rc not in (0, -signal.SIGKILL), second.tail()
        zombie_said = last_word(second)
        assert "leadership lost" in zombie_said or "FENCED_EPOCH" in zombie_said, zombie_said
        late = [c for c in tiering_commits(lake, TABLE) if c.version > takeover and c.epoch != e3]
        assert late == [], f"the zombie (epoch {e2}) committed after epoch {e3} took over: {late}"
        assert client.get_lake(TABLE).epoch == e3, "the zombie's lake report did not land"
        lease_id = load_or_create_lease_id(str(tmp_path / "ckpt"), unique_job)
        assert client.get_lease(lease_id).epoch == e3, "the zombie's lease calls did not land"

        # 3. ZooKeeper goes away for longer than the session timeout.
        job.wait_contenders(2)
        down = time.monotonic()
        zk.stop()
        gone_rc = third.wait(60)
        measured["zk outage: leader exit"] = time.monotonic() - down
        assert gone_rc not in (0, -signal.SIGKILL), third.tail()
        assert "leadership lost" in last_word(third), last_word(third)
        assert standby.proc.poll() is None, f"the standby waits through the outage:\n{standby.tail()}"
        zk.restart()
        back = time.monotonic()
        fourth = standby
        e4 = job.wait_owner(fourth, timeout_s=60)
        measured["zk outage: elected after restart"] = time.monotonic() - back
        assert e4 == e3 + 1
        writer.stop()
    job.wait_commits(e4)
    measured["zk outage: first commit after restart"] = time.monotonic() - back

    # The lake equals the oracle; every term used the lease id kept in the checkpoint.
    wait_until(lambda: lake_matches(lake, oracle), timeout_s=90, what="the lake to catch up with the store")
    assert_lake_equals(lake, oracle)
    commits = tiering_commits(lake, TABLE)
    assert [c.epoch for c in commits] == sorted(c.epoch for c in commits), "epochs only grow along the history"
    assert {c.epoch for c in commits} == {e1, e2, e3, e4}
    assert {c.lease_id for c in commits} == {lease_id}
    assert client.get_lease(lease_id).epoch == e4
    assert client.get_lake(TABLE).epoch == e4

    # 4. Clean stops: a standby on SIGINT (it never led), then the leader on SIGTERM; each exits
    # 0, the leader drops the lease, and both leave the election.
    idle = drivers(conf)
    job.wait_contenders(2)
    idle.signal(signal.SIGINT)
    assert idle.wait(30) == 0, idle.tail()
    assert last_word(idle) == f"tiering: job {unique_job!r} stopped after 0 rounds"
    job.wait_contenders(1)
    fourth.signal(signal.SIGTERM)
    assert fourth.wait(60) == 0, fourth.tail()
    assert last_word(fourth).startswith(f"tiering: job {unique_job!r} stopped after")
    with pytest.raises(LeaseNotFoundError):
        client.get_lease(lease_id)
    assert job.status().contenders == 0
    measured["total"] = time.monotonic() - started
    print("\n" + "\n".join(f"{k}: {v:.1f}s" for k, v in measured.items()))
    print(f"zombie exit {zombie_rc}: {zombie_said}\nwrite batches: {writer.batches}, commits: {len(commits)}")
