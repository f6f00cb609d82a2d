"""A group's table epochs in ZooKeeper: bumped by compare-and-set under the member's job epoch,
each epoch given to one owner, never by a stale term (docs/DESIGN.md §7)."""

from __future__ import annotations

import threading

import pytest
from kazoo.client import KazooClient

from tiering.coord.epoch import bump_epoch
from tiering.coord.paths import table_epoch_path
from tiering.coord.table_epochs import TableHolder, bump_table_epoch, read_table_epoch, read_table_epochs
from tiering.errors import FencedEpochError

pytestmark = pytest.mark.integration


@pytest.fixture
def zk(zk_hosts):
    client = KazooClient(hosts=zk_hosts, timeout=3.0)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def test_concurrent_owners_get_distinct_growing_table_epochs(zk, zk_hosts, unique_job):
    group, table = f"{unique_job}-g", "odd/name.."  # a name ZooKeeper could not take as is
    jobs = [f"{unique_job}-{i}" for i in range(3)]
    epochs = {job: bump_epoch(zk, job) for job in jobs}
    got: dict[str, list[int]] = {job: [] for job in jobs}

    def bump_many(job: str) -> None:
        for _ in range(5):
            got[job].append(bump_table_epoch(zk, group, table, job, epochs[job]).epoch)

    threads = [threading.Thread(target=bump_many, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = sorted(e for values in got.values() for e in values)
    assert every == list(range(1, 16)), "each table epoch handed out once"
    assert all(values == sorted(values) for values in got.values())
    last = read_table_epoch(zk, group, table)
    assert last is not None and last.epoch == 15 and got[last.job][-1] == 15
    assert table_epoch_path(group, table).endswith("/odd%2Fname%2E%2E")
    assert read_table_epochs(zk, group, [table, "never-owned"]) == {table: last}


def test_a_stale_term_of_a_member_cannot_take_a_table(zk, unique_job):
    group = f"{unique_job}-g"
    stale = bump_epoch(zk, unique_job)
    bump_epoch(zk, unique_job)  # a newer term of the same member job
    with pytest.raises(FencedEpochError):
        bump_table_epoch(zk, group, "orders", unique_job, stale)
    assert read_table_epoch(zk, group, "orders") is None
    fresh = bump_epoch(zk, unique_job)
    assert bump_table_epoch(zk, group, "orders", unique_job, fresh) == TableHolder("orders", unique_job, 1)
