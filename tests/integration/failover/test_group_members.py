"""A tiering group on real drivers: three `tiering run` processes (``local[1]`` each) in one group
over twelve tables and one lake, a KV store taking writes the whole time, an embedded ZooKeeper
(docs/DESIGN.md §7).

1. every member takes a share of the tables (each table owned by one member, under a table
   epoch), and the lake follows the store; told there are three (``job.group_members``), none
   takes its first share before all three joined, however far apart their JVMs started;
2. one member is SIGKILLed: its tables are taken by the others under newer table epochs and
   committed within the session timeout plus two triggers (and the time a round of the busy
   machine takes);
3. a fourth member (its driver started at the kill) joins: it takes tables from the others and
   commits them;
4. writes stop: the lake equals the store row by row, no key lost or duplicated; `tiering group`
   (and ``--json``) lists the three members left, each with its host, pid and tables at their
   table epochs;
5. one of the three is frozen (SIGSTOP of its whole process group past its session timeout, writes
   going on again): the other two take its tables and commit them; thawed, nothing of its old
   term lands after another member's commit of one of them (the table epochs only grow in each
   table's Delta history), it exits non-zero, and the lake equals the store; the two left stop
   on SIGTERM with exit 0.

One scenario for all five: each member is a driver JVM, the costliest process a test starts, so
the frozen member is one of the group already running rather than one of a group of its own.
"""

from __future__ import annotations

import json
import signal
import socket
import time
import tomllib
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import tomli_w
from kazoo.client import KazooClient

from tests.support.config import SPARK_LOCAL, write_conf
from tests.support.drivers import Driver, tiering_cli
from tests.support.lake import tiering_commits
from tests.support.oracle import TableOracle, assert_equal_to_store, assert_no_duplicates
from tests.support.running import Writers, caught_up
from tests.support.waiting import wait_until
from tiering.coord.group import read_group
from tiering.coord.table_epochs import TableHolder, read_table_epochs
from tiering.delta_log.lake import Lake

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

SESSION_S = 3.0
TRIGGER_S = 1.0
#: a round of four tables on a loaded two-core machine; the kill's bound is the session timeout,
#: two triggers and this
ROUND_S = 30.0
#: bounds for three driver JVMs starting on two busy cores; never the assertion
START_TIMEOUT_S = 240.0
#: the members running, the killed one's replacement included
GROUP_SIZE = 3


@pytest.fixture
def drivers(tmp_path: Path) -> Iterator[Callable[[Path], Driver]]:
    started: list[Driver] = []

    def start(conf: Path) -> Driver:
        driver = Driver(conf, conf.parent / "driver.log")
        started.append(driver)
        return driver

    yield start
    for driver in started:
        driver.reap()


def _member(tmp_path: Path, name: str, group: str, kv_store, zk_hosts: str) -> Path:
    (tmp_path / name).mkdir()
    conf = write_conf(
        tmp_path / name / "tiering.toml",
        job=name,
        store_url=kv_store.url,
        zk_hosts=zk_hosts,
        lake_root=tmp_path / "lake",  # one lake for the whole group
        group=group,
        zookeeper={"session_timeout_s": SESSION_S},
        trigger={"interval_s": TRIGGER_S},
        lease={"duration_s": 6.0, "renew": True},
        spark={**SPARK_LOCAL, "spark.master": "local[1]", "spark.driver.memory": "768m"},
    )
    # the group's size, waited for at its start up to the bound the test waits for the JVMs
    doc = tomllib.loads(conf.read_text())
    doc["job"].update(group_members=GROUP_SIZE, group_start_wait_s=START_TIMEOUT_S)
    conf.write_bytes(tomli_w.dumps(doc).encode())
    return conf


class _Group:
    """``size`` member drivers over ``tables``, ZooKeeper's view of their group and their lake."""

    def __init__(self, tmp_path: Path, kv_store, zk_hosts: str, job: str, drivers, size: int, tables) -> None:
        self.tables = tables
        self.name = f"{job}-g"
        self.names = [f"{job}-{i}" for i in range(size)]
        self.confs: dict[str, Path] = {}

        def start(name: str) -> Driver:
            self.confs[name] = _member(tmp_path, name, self.name, kv_store, zk_hosts)
            return drivers(self.confs[name])

        self._start = start
        self.members = {name: self._start(name) for name in self.names}
        self.lake = Lake.at(str(tmp_path / "lake"))
        # the test's own reader: a session long enough not to drop while the drivers load the cores
        self.zk = KazooClient(hosts=zk_hosts, timeout=15.0)
        self.zk.start(timeout=10)

    def join(self, name: str) -> Driver:
        """Start one more member, ``name``."""
        self.members[name] = self._start(name)
        return self.members[name]

    def owners(self) -> dict[str, TableHolder]:
        return read_table_epochs(self.zk, self.name, [t.name for t in self.tables])

    def wait_shared(self) -> None:
        """Until every member owns some of the tables and every table is in the lake."""

        def shared() -> bool:
            owners = self.owners()
            return len(owners) == len(self.tables) and {o.job for o in owners.values()} == set(self.names)

        wait_until(shared, "every member to own some of the tables", timeout_s=START_TIMEOUT_S)
        wait_until(
            lambda: all(self.lake.load(t.name) is not None for t in self.tables),
            "every table in the lake",
            timeout_s=START_TIMEOUT_S,
        )

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()


def _tables(client, prefix: str, count: int, rows: int = 50) -> list[TableOracle]:
    tables = [TableOracle(client, f"{prefix}{i}", num_buckets=2) for i in range(count)]
    for table in tables:
        table.upsert(range(rows))
    return tables


def _list_group(pool: ThreadPoolExecutor, conf: Path) -> list[Future]:
    """`tiering group --json` and `tiering group`, started side by side."""
    return [pool.submit(tiering_cli, "group", "--conf", str(conf), *flag) for flag in (["--json"], [])]


def _assert_group_listed(listing: list[Future], group: _Group, live: list[str], owners: list[dict]) -> None:
    """What the two commands printed: the ``live`` members with their pids and the tables each owns
    at the table epochs ZooKeeper held (``owners``, read before and after them), every table owned."""
    listed, text = (future.result() for future in listing)
    assert listed.returncode == 0, listed.stderr
    shown = json.loads(listed.stdout)
    assert shown["group"] == group.name and shown["unassigned"] == {}
    assert {m["job"]: m["pid"] for m in shown["members"]} == {n: group.members[n].pid for n in live}
    assert all(m["host"] == socket.gethostname() and m["since_ms"] > 0 for m in shown["members"])
    owned = {t: (m["job"], e) for m in shown["members"] for t, e in m["tables"].items()}
    assert owned in [{t: (o.job, o.epoch) for t, o in read.items()} for read in owners], owned
    assert text.returncode == 0, text.stderr
    assert all(name in text.stdout and str(group.members[name].pid) in text.stdout for name in live)


def test_members_share_the_tables_and_take_a_killed_ones_and_a_frozen_ones(
    kv_store, zk_hosts, unique_job, tmp_path, drivers
):
    client = kv_store.client()
    tables = _tables(client, "t", 12, rows=20)
    group = _Group(tmp_path, kv_store, zk_hosts, unique_job, drivers, GROUP_SIZE, tables)
    lake, names = group.lake, group.names
    try:
        with Writers(tables, key_space=60, batch=3, every_s=0.2) as writers:
            group.wait_shared()
            for name in names:  # the start grace's one line: the count met, not its end
                first = [
                    line for line in group.members[name].log.read_text().splitlines() if "first assignment" in line
                ]
                assert len(first) == 1 and first[0].endswith(
                    f"job.group_members = {GROUP_SIZE}: {GROUP_SIZE} joined"
                ), first
            print(f"tables moved at the start: {sum(o.epoch - 1 for o in group.owners().values())}")
            assert read_group(zk_hosts, group.name, []).members == sorted(names), "what `tiering status` shows"
            killed = names[0]
            lost = {t: o.epoch for t, o in group.owners().items() if o.job == killed}
            versions = {t: lake.load(t).version for t in lost}
            group.members[killed].kill()
            killed_at = time.monotonic()
            # A fourth member's driver starts now: it joins once its query has started, tens of
            # seconds after the others took the killed member's tables.
            fourth = f"{unique_job}-3"
            group.join(fourth)

            def taken() -> bool:
                now = group.owners()
                return all(now[t].job != killed and now[t].epoch > epoch for t, epoch in lost.items()) and all(
                    lake.load(t).version > versions[t] for t in lost
                )

            # The session expires up to SESSION_S after the kill; then a rebalance, a trigger to plan,
            # a round to commit.
            bound_s = SESSION_S + 2 * TRIGGER_S + ROUND_S
            wait_until(taken, "the killed member's tables taken and committed by the others", timeout_s=bound_s)
            print(f"killed member's {len(lost)} tables moved and committed in {time.monotonic() - killed_at:.1f}s")

            def joined() -> bool:
                mine = [t for t, o in group.owners().items() if o.job == fourth]
                return bool(mine) and all(
                    any(c.lease_id.startswith(f"{fourth}-") for c in tiering_commits(lake, t)) for t in mine
                )

            wait_until(joined, "the fourth member to take tables and commit them", timeout_s=START_TIMEOUT_S)
            writers.stop()
        with ThreadPoolExecutor(2) as pool:  # `tiering group` while the lake catches up: the members stay
            before = group.owners()
            listing = _list_group(pool, group.confs[names[1]])
            wait_until(lambda: caught_up(client, lake, tables), "the lake to reach every log end", timeout_s=120)
            assert_equal_to_store(client, lake, *tables)
            assert_no_duplicates(tmp_path / "lake", tables)
            _assert_group_listed(listing, group, [*names[1:], fourth], [before, group.owners()])
        counts = Counter(o.job for o in group.owners().values())
        assert set(counts) == {names[1], names[2], fourth} and sum(counts.values()) == len(tables), counts
        assert all(client.get_lake(t.name).group == group.name for t in tables)
        _freeze_one(group, client, tables, frozen=names[1], others=[names[2], fourth], lake_dir=tmp_path / "lake")
    finally:
        group.close()
    live = [group.members[name] for name in (names[2], fourth)]
    for member in live:  # all at once: each stops between rounds on its own
        member.signal(signal.SIGTERM)
    for member in live:
        assert member.wait(120) == 0, member.tail()


def _freeze_one(
    group: _Group, client, tables: list[TableOracle], frozen: str, others: list[str], lake_dir: Path
) -> None:
    """Step 5: ``frozen`` is frozen past its session timeout while writes go on; ``others`` take
    and commit its tables under newer table epochs; thawed, it commits nothing of them and exits
    non-zero; the lake then equals the store."""
    lake, mine = group.lake, f"{frozen}-"
    with Writers(tables, key_space=200, batch=5, every_s=0.2):
        lost = {t: o.epoch for t, o in group.owners().items() if o.job == frozen}
        assert lost, f"{frozen} owns none of the tables"
        group.members[frozen].freeze()
        try:

            def taken() -> bool:
                now = group.owners()
                return all(now[t].job in others and now[t].epoch > e for t, e in lost.items()) and all(
                    any(c.epoch > e and not c.lease_id.startswith(mine) for c in tiering_commits(lake, t))
                    for t, e in lost.items()
                )

            wait_until(taken, "the frozen member's tables taken and committed by the others", timeout_s=60)
        finally:
            group.members[frozen].thaw()
        assert group.members[frozen].wait(120) != 0, "the thawed member's term is over"
    for table, epoch in lost.items():
        history = tiering_commits(lake, table)
        first_other = next(i for i, c in enumerate(history) if c.epoch > epoch and not c.lease_id.startswith(mine))
        late = [c for c in history[first_other:] if c.lease_id.startswith(mine)]
        assert not late, f"{table}: the frozen member committed after the others took it: {late}"
        epochs = [c.epoch for c in history]
        assert epochs == sorted(epochs), f"{table}: table epochs of its commits went down: {epochs}"
    wait_until(lambda: caught_up(client, lake, tables), "the lake to reach every log end", timeout_s=120)
    assert_equal_to_store(client, lake, *tables)
    assert_no_duplicates(lake_dir, tables)
    assert all(client.get_lake(t).job in others for t in lost)
