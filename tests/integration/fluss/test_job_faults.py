"""`tiering run` over a real Apache Fluss cluster under faults, lake == Fluss row by row
(tests/support/fluss_rows.py's independent read of Fluss).

A zombie: a driver held at its first round's Delta commit (the ``before_delta_commit`` failpoint,
after the round's last ZooKeeper check: nothing between it and the commit asks ZooKeeper or Fluss)
is frozen (SIGSTOP of its whole process group) past its ZooKeeper session; a second driver takes
over with the next epoch and tiers everything; thawed, the first goes straight on to its commit,
whatever its session watchdog learns meanwhile, and the lake refuses it: the table's ``txn`` names
the newer term (docs/DESIGN.md §7). So the Delta commit fence alone stops it, and Fluss's lease,
which has no epoch, has no part in it.

A tablet server restart (a cluster of the test's own) while a continuous job runs and writes go
on: the job rides it out and catches up.

A Fluss table dropped and re-created between two runs with another bucket count and another
primary key (a new table id): the next run replaces the lake table with the new table's rows.
A missing database and an unreachable Fluss are tests/integration/fluss/test_check.py's.
"""

from __future__ import annotations

import re
import uuid

import pytest

from tests.support.drivers import Driver
from tests.support.fluss_job import BUCKETS, COLUMNS, job_conf, lake_rows, row, snapshots_covering_the_log
from tests.support.fluss_rows import FlussRows
from tests.support.lake import tiering_commits
from tests.support.waiting import wait_until
from tiering.failpoints import sleeping

pytestmark = pytest.mark.integration

pytest.importorskip("fluss")

#: the held round's sleep: over by the time the zombie is thawed, so it goes straight on to commit
HOLD_S = 20
#: the continuous job's rounds: one soon after each write, so the lake catches up without waiting
TRIGGER_S = 1.0


def test_a_zombie_driver_thawed_after_a_takeover_lands_nothing(
    fluss_cluster, writer, store, database, zk_server, tmp_path
):
    writer.create_table("orders", COLUMNS, ["id"], BUCKETS)
    writer.upsert("orders", [row(k) for k in range(200)])
    snapshots_covering_the_log(store, "orders")
    conf = job_conf(
        tmp_path, f"zombie-{uuid.uuid4().hex[:6]}", fluss_cluster.bootstrap_servers, database, zk_server.hosts
    )

    zombie = Driver(conf, available_now=True, failpoint=f"before_delta_commit=sleep:{HOLD_S}")
    try:
        wait_until(lambda: zombie.saw(sleeping("before_delta_commit")), "the round held at its commit", timeout_s=240)
        zombie.freeze()
        writer.upsert("orders", [row(k, 1) for k in range(0, 300, 3)])
        writer.delete("orders", [{"id": k} for k in range(1, 200, 7)])
        successor = Driver(conf, available_now=True)
        assert successor.wait(300) == 0, successor.tail()
        assert lake_rows(tmp_path, "orders") == writer.current_rows("orders")
        landed = tiering_commits(tmp_path / "lake", "orders")
    finally:
        zombie.thaw()
    rc = zombie.wait(120)
    assert rc != 0, zombie.tail()
    (newer,) = {c.epoch for c in landed}
    refused = re.search(r"table=orders epoch=(\d+) round=\d+: Delta commit refused by the lake", zombie.output())
    assert refused is not None, f"the zombie's commit reached the lake and was refused there: {zombie.tail()}"
    assert int(refused.group(1)) < newer, f"the zombie's term is older than the successor's {newer}"
    assert f"its txn is at epoch {newer}" in zombie.output(), zombie.tail()
    commits = tiering_commits(tmp_path / "lake", "orders")
    assert commits == landed, f"the zombie committed after the takeover: {commits[len(landed) :]}"
    assert len({c.round for c in commits}) == len(commits), f"each commit one round: {commits}"
    assert lake_rows(tmp_path, "orders") == writer.current_rows("orders")


def lake_caught_up(tmp_path, table: str, rows: FlussRows) -> bool:
    return (tmp_path / "lake" / table / "_delta_log").exists() and lake_rows(tmp_path, table) == rows.current_rows(
        table
    )


def test_a_continuous_job_rides_out_a_tablet_server_restart(fluss_cluster_factory, zk_server, tmp_path):
    cluster = fluss_cluster_factory()
    database = f"db_{uuid.uuid4().hex[:8]}"
    rows = FlussRows(cluster.bootstrap_servers, database)
    try:
        rows.create_table("orders", COLUMNS, ["id"], BUCKETS)
        rows.upsert("orders", [row(k) for k in range(200)])
        conf = job_conf(
            tmp_path,
            f"restart-{uuid.uuid4().hex[:6]}",
            cluster.bootstrap_servers,
            database,
            zk_server.hosts,
            trigger={"interval_s": TRIGGER_S},
        )
        driver = Driver(conf)
        try:
            wait_until(lambda: lake_caught_up(tmp_path, "orders", rows), "the first rounds", timeout_s=240)
            rows.upsert("orders", [row(k, 1) for k in range(0, 300, 3)])
            cluster.restart_tablet()
            rows.upsert("orders", [row(k, 2) for k in range(0, 300, 5)])
            rows.delete("orders", [{"id": k} for k in range(1, 200, 7)])
            wait_until(lambda: lake_caught_up(tmp_path, "orders", rows), "the lake after the restart", timeout_s=240)
            assert driver.proc.poll() is None, driver.tail()
        finally:
            driver.kill()
    finally:
        rows.close()


def test_a_table_recreated_with_other_buckets_and_key_replaces_the_lake_table(
    fluss_cluster, writer, database, zk_server, tmp_path
):
    writer.create_table("items", COLUMNS, ["id"], BUCKETS)
    writer.upsert("items", [row(k) for k in range(100)])
    job = f"recreated-{uuid.uuid4().hex[:6]}"
    conf = job_conf(
        tmp_path, job, fluss_cluster.bootstrap_servers, database, zk_server.hosts, tables={"include": ["items"]}
    )
    first = Driver(conf, available_now=True)
    assert first.wait(300) == 0, first.tail()

    writer.recreate_table("items", {**COLUMNS, "n": "INT NOT NULL"}, ["id", "n"], BUCKETS - 1)
    recreated = FlussRows(fluss_cluster.bootstrap_servers, database)  # the writer's client knows the old table
    try:
        recreated.upsert("items", [row(k, v) for k in range(0, 60, 2) for v in (1, 2)])
        second = Driver(conf, available_now=True)
        assert second.wait(300) == 0, second.tail()

        def by_key(r: dict) -> tuple:
            return r["id"], r["n"]

        assert sorted(lake_rows(tmp_path, "items"), key=by_key) == sorted(recreated.current_rows("items"), key=by_key)
    finally:
        recreated.close()
