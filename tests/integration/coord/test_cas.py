"""Compare-and-set on a real ZooKeeper: no update is lost to a concurrent writer, and a znode that
changes under every attempt makes the writer give up, naming it (docs/DESIGN.md §7)."""

from __future__ import annotations

import threading

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from tiering.coord.cas import MAX_CAS_ATTEMPTS, CasConflict, compare_and_set, create_or_set, is_conflict
from tiering.errors import CoordinationError

pytestmark = pytest.mark.integration


@pytest.fixture
def clients(zk_hosts):
    made = [KazooClient(hosts=zk_hosts, timeout=3.0) for _ in range(3)]
    for client in made:
        client.start(timeout=10)
    yield made
    for client in made:
        client.stop()
        client.close()


def _increment(zk: KazooClient, path: str, meddle=lambda: None) -> int:
    """One attempt: read the counter, let ``meddle`` run, write the next value over the version read."""
    try:
        data, stat = zk.get(path)
        current, version = int(data), stat.version
    except NoNodeError:  # the counter starts at 1
        current, version = 0, None
    meddle()
    tx = zk.transaction()
    create_or_set(tx, path, str(current + 1).encode(), version)
    (result,) = tx.commit()
    if is_conflict(result):
        raise CasConflict(path)
    return current + 1


def test_concurrent_increments_lose_no_update(clients, unique_job):
    path = f"/cas-test/{unique_job}"
    clients[0].ensure_path("/cas-test")
    got: list[list[int]] = [[] for _ in clients]

    def increment_many(i: int) -> None:
        for _ in range(10):
            got[i].append(compare_and_set(lambda: _increment(clients[i], path), what=f"counter at {path}"))

    threads = [threading.Thread(target=increment_many, args=(i,)) for i in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(v for values in got for v in values) == list(range(1, 31)), "each value written once"
    assert int(clients[0].get(path)[0]) == 30


def test_a_znode_changed_under_every_attempt_gives_up_naming_it(clients, unique_job):
    path = f"/cas-test/{unique_job}"
    writer, meddler = clients[0], clients[1]
    meddler.create(path, b"100", makepath=True)
    meddled: list[int] = []

    def meddle() -> None:
        meddled.append(1)
        meddler.set(path, str(1000 + len(meddled)).encode())

    with pytest.raises(CoordinationError, match=f"counter at {path} kept changing"):
        compare_and_set(lambda: _increment(writer, path, meddle), what=f"counter at {path}")
    assert len(meddled) == MAX_CAS_ATTEMPTS
    assert writer.get(path)[0] == str(1000 + MAX_CAS_ATTEMPTS).encode(), "only the meddler's writes landed"
