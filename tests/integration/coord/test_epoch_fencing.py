"""Epochs only grow, and a write fenced by a superseded epoch never lands (docs/DESIGN.md §7)."""

from __future__ import annotations

import threading

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from tiering.coord import acquire_leadership, read_status
from tiering.coord.epoch import Epoch, bump_epoch, read_epoch
from tiering.coord.fencing import fenced_set
from tiering.coord.paths import epoch_path, owner_path
from tiering.errors import CoordinationError, FencedEpochError, LeadershipLostError

pytestmark = pytest.mark.integration

SESSION_S = 3.0


@pytest.fixture
def zk(zk_hosts):
    client = KazooClient(hosts=zk_hosts, timeout=SESSION_S)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def test_concurrent_bumps_hand_out_distinct_increasing_epochs(zk_hosts, unique_job):
    clients = [KazooClient(hosts=zk_hosts, timeout=SESSION_S) for _ in range(4)]
    for c in clients:
        c.start(timeout=10)
    got: list[list[int]] = [[] for _ in clients]

    def bump_many(i: int) -> None:
        for _ in range(10):
            got[i].append(bump_epoch(clients[i], unique_job).value)

    threads = [threading.Thread(target=bump_many, args=(i,)) for i in range(len(clients))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = sorted(e for per_client in got for e in per_client)
    assert everything == list(range(1, 41))
    assert all(per_client == sorted(per_client) for per_client in got)
    assert read_epoch(clients[0], unique_job) == Epoch(40, 39)
    for c in clients:
        c.stop()


def test_bump_guarded_by_a_vanished_lock_node_writes_nothing(zk, unique_job):
    first = bump_epoch(zk, unique_job)
    with pytest.raises(LeadershipLostError, match="lock node /nowhere/lock-0001"):
        bump_epoch(zk, unique_job, guard="/nowhere/lock-0001")
    assert read_epoch(zk, unique_job) == first


def test_stale_leader_write_is_fenced(zk_hosts, zk, unique_job):
    term = acquire_leadership(zk_hosts, unique_job, SESSION_S)
    path = f"/tiering/jobs/{unique_job}/state"
    assert term.fenced_set(path, b"term-1") == 0

    newer = bump_epoch(zk, unique_job)  # another term began (its leader won elsewhere)
    assert newer.value == term.epoch + 1
    with pytest.raises(FencedEpochError) as fenced:
        term.fenced_set(path, b"stale")
    assert fenced.value.epoch == term.epoch
    assert unique_job in str(fenced.value) and epoch_path(unique_job) in str(fenced.value)
    assert fenced.value.code == "FENCED_EPOCH"
    with pytest.raises(FencedEpochError):
        fenced_set(zk, unique_job, term.granted, f"/tiering/jobs/{unique_job}/fresh", b"stale")
    assert zk.get(path)[0] == b"term-1"
    assert zk.exists(f"/tiering/jobs/{unique_job}/fresh") is None
    with pytest.raises(LeadershipLostError, match="moved on"):
        term.check()

    assert fenced_set(zk, unique_job, newer, path, b"term-2") == 1
    assert zk.get(path)[0] == b"term-2"
    term.resign()


def test_owner_record_and_status(zk_hosts, unique_job):
    assert read_status(zk_hosts, unique_job).epoch is None
    term = acquire_leadership(zk_hosts, unique_job, SESSION_S, owner={"spark_app_id": "app-42"})
    status = read_status(zk_hosts, unique_job)
    assert status.epoch == term.epoch == 1
    assert status.owner["spark_app_id"] == "app-42"
    assert status.owner["epoch"] == 1
    assert status.leader == f"{status.owner['host']}:{status.owner['pid']}"
    assert status.contenders == 1
    term.resign()
    after = read_status(zk_hosts, unique_job)
    assert (after.leader, after.contenders, after.epoch) == (None, 0, 1)
    assert after.owner["epoch"] == 1  # the record of the last term outlives it


def test_digest_acl_keeps_other_clients_from_bumping(zk_hosts, zk, unique_job):
    term = acquire_leadership(zk_hosts, unique_job, SESSION_S, auth=("tiering", "s3cret"))
    assert term.fenced_set(f"/tiering/jobs/{unique_job}/state", b"mine") == 0

    with pytest.raises(CoordinationError, match="NoAuth"):
        bump_epoch(zk, unique_job)
    with pytest.raises(NoAuthError):
        zk.set(owner_path(unique_job), b"{}")
    assert read_epoch(zk, unique_job) == term.granted
    assert read_status(zk_hosts, unique_job).epoch == term.epoch  # reading stays open
    term.check()

    intruder = KazooClient(hosts=zk_hosts, timeout=SESSION_S, auth_data=[("digest", "tiering:wrong")])
    intruder.start(timeout=10)
    with pytest.raises(NoAuthError):
        intruder.set(epoch_path(unique_job), b"99")
    intruder.stop()
    term.resign()

    again = acquire_leadership(zk_hosts, unique_job, SESSION_S, auth=("tiering", "s3cret"))
    assert again.epoch == term.epoch + 1
    again.resign()
