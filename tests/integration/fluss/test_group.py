"""A tiering group over a real Apache Fluss database: two `tiering run` members (``[job] group``
set, one lake, a checkpoint and a Fluss lease each; each owned half the tables in an earlier run)
share its tables (docs/DESIGN.md §7, "What fences what against Fluss").

What is looked for: every table owned by exactly one member under a table epoch in ZooKeeper, and
every Delta commit of it made by that member (its lease id) under that table epoch, in the
group's name; each member's own Fluss lease holding the snapshots its first round reads past
``kv.snapshot.num-retained`` newer ones while the round is held at its commit, and dropped at the
member's clean stop (Fluss then collects them); lake == Fluss row by row through
tests/support/fluss_rows.py's independent read. And `tiering group` over a Fluss database: its
selected tables, none owned while no member runs.
"""

from __future__ import annotations

import contextlib
import json
import signal
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomli_w
from kazoo.client import KazooClient

from tests.support.drivers import Driver, tiering_cli
from tests.support.fluss_job import BUCKETS, COLUMNS, job_conf, lake_rows, row, snapshots_covering_the_log
from tests.support.fluss_rows import FlussRows
from tests.support.lake import tiering_commits
from tests.support.store_sides import SNAPSHOT_WAIT
from tests.support.waiting import wait_until
from tiering.coord.epoch import bump_epoch
from tiering.coord.table_epochs import bump_table_epoch, read_table_epochs
from tiering.enumerator.splits import SnapshotSplit
from tiering.failpoints import sleeping
from tiering.kvstore.contract import SnapshotRef
from tiering.state.offset_log import newest_batch, read_batch_offset

pytestmark = pytest.mark.integration

pytest.importorskip("fluss")

TABLES = [f"t{i}" for i in range(4)]
#: the members' ZooKeeper session: the longest their first assignments wait for each other
SESSION_S = 20.0
#: bounds for two driver JVMs starting on busy cores; never the assertion
START_TIMEOUT_S = 300.0


def _member_conf(tmp_path: Path, name: str, group: str, servers: str, database: str, zk_hosts: str) -> Path:
    """A member's conf: its own checkpoint, the group's one lake."""
    (tmp_path / name).mkdir()
    path = job_conf(tmp_path / name, name, servers, database, zk_hosts, trigger={"interval_s": 1.0})
    conf = tomllib.loads(path.read_text())
    conf["job"]["group"] = group
    conf["lake"]["root"] = str(tmp_path / "lake")
    # a continuous member joins once its query runs: two JVMs on busy cores start seconds apart, and
    # its first assignment waits at most a session timeout for the peers it expects
    conf["zookeeper"]["session_timeout_s"] = SESSION_S
    path.write_bytes(tomli_w.dumps(conf).encode())
    return path


def test_tiering_group_lists_a_fluss_groups_tables(fluss_cluster, fluss_database, zk_server, tmp_path):
    rows = FlussRows(fluss_cluster.bootstrap_servers, fluss_database)
    try:
        for table in ("a", "b"):
            rows.create_table(table, COLUMNS, ["id"], BUCKETS)
        group = f"lister-{uuid.uuid4().hex[:6]}"
        conf = _member_conf(tmp_path, "lister", group, fluss_cluster.bootstrap_servers, fluss_database, zk_server.hosts)
        listed = tiering_cli("group", "--json", "--conf", str(conf))
    finally:
        rows.close()
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == {"group": group, "members": [], "unassigned": {"a": None, "b": None}}


def _held_snapshots(checkpoint: Path) -> list[SnapshotRef]:
    """The snapshots the member's round in flight reads (its checkpointed offset's splits)."""
    batch = newest_batch(str(checkpoint))
    assert batch is not None, f"no round in {checkpoint}"
    return [s.ref for s in read_batch_offset(str(checkpoint), batch).splits if isinstance(s, SnapshotSplit)]


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[Driver]]:
    """The drivers a test starts, reaped at its end whatever happened."""
    drivers: list[Driver] = []
    yield drivers
    for driver in drivers:
        driver.reap()


def _held_or_gone(member: Driver) -> bool:
    return member.saw(sleeping("before_delta_commit")) or member.proc.poll() is not None


def test_two_members_share_a_fluss_database_each_under_its_own_lease(
    fluss_cluster, writer, store, database, zk_server, tmp_path, started
):
    for table in TABLES:
        writer.create_table(table, COLUMNS, ["id"], BUCKETS)
        writer.upsert(table, [row(k) for k in range(120)])
    for table in TABLES:
        snapshots_covering_the_log(store, table)
    job = f"grp-{uuid.uuid4().hex[:6]}"
    group, names = f"{job}-g", [f"{job}-{i}" for i in range(2)]
    # The group ran before: each member owned half the tables, so each one's first assignment waits
    # for the other to join and keeps what it had (coord/start_grace.py), instead of the first JVM
    # up taking every table and handing half back mid-round.
    zk = KazooClient(hosts=zk_server.hosts, timeout=15.0)
    zk.start(timeout=10)
    for i, table in enumerate(TABLES):
        owner = names[i * len(names) // len(TABLES)]
        bump_table_epoch(zk, group, table, owner, bump_epoch(zk, owner))
    confs = {
        n: _member_conf(tmp_path, n, group, fluss_cluster.bootstrap_servers, database, zk_server.hosts) for n in names
    }
    # each member's rounds are held at their commit while this file exists: the first round's
    # snapshots stay in flight until the checks of its lease are done
    hold = tmp_path / "hold"
    hold.touch()
    members = {n: Driver(c, failpoint=f"before_delta_commit=hold:{hold}") for n, c in confs.items()}
    started.extend(members.values())
    try:
        for name, member in members.items():
            wait_until(
                lambda m=member: _held_or_gone(m), f"{name}'s first round held at its commit", timeout_s=START_TIMEOUT_S
            )
            assert member.proc.poll() is None, f"{name} exited {member.proc.returncode}: {member.tail()}"
        held = {n: _held_snapshots(tmp_path / n / "ckpt") for n in names}
        ids = {store.table(t).table_id: t for t in TABLES}
        assert all(held.values()), f"each member's first round bootstraps its own tables: {held}"
        tables_of = {n: {ids[ref.table_id] for ref in refs} for n, refs in held.items()}
        assert not tables_of[names[0]] & tables_of[names[1]], f"no table in both members' rounds: {tables_of}"

        for version in range(1, fluss_cluster.num_retained + 2):  # more newer snapshots than Fluss retains
            for table in TABLES:
                writer.upsert(table, [row(k, version) for k in range(0, 120, 7)])
            for table in TABLES:
                snapshots_covering_the_log(store, table)
        for name, refs in held.items():
            gone = [r for r in refs if not store.snapshot_available(ids[r.table_id], r)]
            assert not gone, f"{name}'s lease keeps the snapshots its round reads: {gone} collected"
        hold.unlink()

        for table in TABLES:
            writer.delete(table, [{"id": k} for k in range(0, 120, 11)])
        for table in TABLES:
            wait_until(
                lambda t=table: (
                    (tmp_path / "lake" / t / "_delta_log").exists() and lake_rows(tmp_path, t) == writer.current_rows(t)
                ),
                f"the lake's {table} caught up with Fluss",
                timeout_s=START_TIMEOUT_S,
            )
        owners = read_table_epochs(zk, group, TABLES)
    finally:
        zk.stop()
        zk.close()
        for member in members.values():
            if member.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):  # it may exit meanwhile
                    member.signal(signal.SIGTERM)  # a clean stop: the member drops its lease
    for name, member in members.items():
        assert member.wait(120) == 0, member.tail()
        assert member.saw(f"stopped; lease {name}-"), f"{name} dropped its own lease at its clean stop: {member.tail()}"

    assert set(owners) == set(TABLES) and {o.job for o in owners.values()} == set(names), owners
    for table, owner in owners.items():
        commits = tiering_commits(tmp_path / "lake", table)
        assert commits and all(c.lease_id.startswith(f"{owner.job}-") for c in commits), (table, owner, commits)
        assert {c.epoch for c in commits} == {owner.epoch}, f"{table}'s commits carry its table epoch: {commits}"
        assert lake_rows(tmp_path, table) == writer.current_rows(table)

    for version in range(10, 10 + fluss_cluster.num_retained + 1):  # both leases dropped: collected
        for table in TABLES:
            writer.upsert(table, [row(k, version) for k in range(1, 120, 13)])
        for table in TABLES:
            snapshots_covering_the_log(store, table)
    for ref in [r for refs in held.values() for r in refs]:
        wait_until(
            lambda ref=ref: not store.snapshot_available(ids[ref.table_id], ref), f"{ref} collected", **SNAPSHOT_WAIT
        )
