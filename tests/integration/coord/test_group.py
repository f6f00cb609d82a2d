"""A tiering group's members on real ZooKeeper sessions: they share the tables evenly, a member
with another selection is refused, and a departed member's tables are taken under newer table
epochs (docs/DESIGN.md §7)."""

from __future__ import annotations

import threading
import time

import pytest
from kazoo.client import KazooClient

from tiering.conf.model import TablesConfig
from tiering.coord.epoch import bump_epoch
from tiering.coord.group import GroupMember
from tiering.coord.rebalancer import GroupRebalancer
from tiering.coord.start_grace import StartGrace
from tiering.coord.table_epochs import read_table_epochs
from tiering.errors import ConfigError

pytestmark = pytest.mark.integration

TABLES = [f"t{i:02d}" for i in range(12)]


@pytest.fixture
def sessions(zk_hosts):
    started: list[KazooClient] = []

    def start() -> KazooClient:
        client = KazooClient(hosts=zk_hosts, timeout=3.0)
        client.start(timeout=10)
        started.append(client)
        return client

    yield start
    for client in started:
        client.stop()
        client.close()


def _member(sessions, group: str, job: str, tables: TablesConfig | None = None) -> GroupMember:
    zk = sessions()
    member = GroupMember(zk, group, job, bump_epoch(zk, job), tables or TablesConfig())
    member.join()
    return member


def test_three_members_share_twelve_tables_and_take_a_departed_ones(sessions, unique_job):
    group = f"{unique_job}-g"
    members = [_member(sessions, group, f"{unique_job}-{i}") for i in range(3)]
    owned = {m.job: m.rebalance(TABLES).tables for m in members}
    assert sorted(t for tables in owned.values() for t in tables) == TABLES, "each table owned once"
    assert [len(tables) for tables in owned.values()] == [4, 4, 4]
    epochs = read_table_epochs(members[0].zk, group, TABLES)
    assert {t: (e.job, e.epoch) for t, e in epochs.items()} == {
        t: (job, epoch) for job, tables in owned.items() for t, epoch in tables.items()
    }
    assert all(m.rebalance(TABLES).tables == owned[m.job] for m in members), "stable: nothing moves again"

    gone, *rest = members
    gone.zk.stop()  # its session ends: its member node goes
    for member in rest:
        assert member.changed.wait(10), "the membership watch fired"
    after = {m.job: m.rebalance(TABLES).tables for m in rest}
    after = {m.job: m.rebalance(TABLES).tables for m in rest}  # the first saw the other one's old share
    assert sorted(t for tables in after.values() for t in tables) == TABLES
    assert [len(tables) for tables in after.values()] == [6, 6]
    for member in rest:
        assert set(owned[member.job]) <= set(after[member.job]), "a survivor keeps its own tables"
    taken = read_table_epochs(rest[0].zk, group, list(owned[gone.job]))
    assert all(taken[t].job != gone.job and taken[t].epoch > owned[gone.job][t] for t in owned[gone.job])


def test_a_member_selecting_other_tables_is_refused_naming_both(sessions, unique_job):
    group = f"{unique_job}-g"
    _member(sessions, group, f"{unique_job}-a", TablesConfig(include=["orders*", "items"]))
    _member(sessions, group, f"{unique_job}-b", TablesConfig(include=["items", "orders*", "items"]))
    with pytest.raises(ConfigError) as refused:
        _member(sessions, group, f"{unique_job}-c", TablesConfig(include=["orders*"]))
    assert all(part in str(refused.value) for part in (f"{unique_job}-c", "'orders*'", "'items'", group))


def start_together(sessions, group: str, jobs: list[str], grace: StartGrace | None, apart_s: float) -> int:
    """Start one rebalancer per job, ``apart_s`` after each other, as members started together
    join; the number of table moves (table epoch bumps beyond each table's first) once all run."""
    started: list[GroupRebalancer] = []

    def start(job: str) -> None:
        zk = sessions()
        member = GroupMember(zk, group, job, bump_epoch(zk, job), TablesConfig())
        started.append(GroupRebalancer(member, lambda: TABLES, every_s=60.0, grace=grace).start())

    threads = [threading.Thread(target=start, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
        time.sleep(apart_s)
    for thread in threads:
        thread.join(30)
    try:
        epochs = read_table_epochs(sessions(), group, TABLES)
        assert sorted(epochs) == TABLES
        return sum(e.epoch - 1 for e in epochs.values())
    finally:
        for rebalancer in started:
            rebalancer.stop()


def test_members_started_together_take_their_shares_without_moving_tables(sessions, unique_job):
    jobs = [f"{unique_job}-{i}" for i in range(3)]
    grace = StartGrace(quiet_s=1.0, max_s=5.0)
    begun = time.monotonic()
    assert start_together(sessions, f"{unique_job}-g", jobs, grace, apart_s=0.3) == 0, "no table moved"
    assert time.monotonic() - begun < 4.0, "started once the membership was quiet, not at the grace's end"
    assert start_together(sessions, f"{unique_job}-h", jobs, None, apart_s=0.3) > 0, "without a grace, tables move"


def test_a_new_group_s_members_joining_apart_wait_for_the_configured_count_instead_of_moving_tables(
    sessions, unique_job, caplog
):
    jobs = [f"{unique_job}-{i}" for i in range(3)]
    quiet = StartGrace(quiet_s=0.5, max_s=10.0)
    assert start_together(sessions, f"{unique_job}-g", jobs, quiet, apart_s=1.5) > 0, "the first took every table"
    counted = StartGrace(quiet_s=0.5, max_s=10.0, members=3)
    with caplog.at_level("INFO", logger="tiering.coord.rebalancer"):
        assert start_together(sessions, f"{unique_job}-h", jobs, counted, apart_s=1.5) == 0, "no table moved"
    settled = [r.getMessage() for r in caplog.records if "first assignment" in r.getMessage()]
    assert len(settled) == 3 and all(m.endswith("job.group_members = 3: 3 joined") for m in settled), settled
