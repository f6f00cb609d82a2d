"""The operator's writes over a real Apache Fluss database (docs/fluss.md, "Operating a Fluss job"):
`tiering leases list` and `leases drop`, `tiering take-over` and `tiering resync`, each through
the command line, each proven by what Fluss keeps afterwards (a dropped or released hold lets
Fluss collect its snapshot once newer ones are taken) or by the lake row by row against Fluss.

Fluss lists no lease and no lease's holds: `leases list` shows the checkpoint's lease id and says
so. Its leases have no epoch and it keeps no lake report, so `take-over` finds the job that holds a
table from the lake's newest round commit (its job and lease id) and releases that lease's holds of
the table.
"""

from __future__ import annotations

import json
import uuid

import pytest

from tests.support.drivers import tiering_cli
from tests.support.fluss_job import (
    COLUMNS,
    job_conf,
    lake_rows,
    row,
    snapshots_covering_the_log,
    table_with_changes_after_its_snapshot,
)
from tests.support.store_sides import SNAPSHOT_WAIT
from tests.support.waiting import wait_until
from tiering.delta_log.lake import Lake
from tiering.state.lease_file import load_or_create_lease_id

pytestmark = pytest.mark.integration

pytest.importorskip("fluss")


def _held_then_collected(store, writer, table: str, lease_id: str, let_go) -> None:
    """Hold ``table``'s (one bucket) newest snapshot under ``lease_id``; ``let_go()`` must free it:
    after three newer snapshots (two are retained) Fluss collects it."""
    held = snapshots_covering_the_log(store, table)[0]
    assert store.acquire(lease_id, 1, 120_000, [held]) == []
    let_go()
    for version in range(1, 4):
        writer.upsert(table, [row(0, version)])
        snapshots_covering_the_log(store, table)
    wait_until(
        lambda: not store.snapshot_available(table, held), f"snapshot {held} collected once let go", **SNAPSHOT_WAIT
    )


def test_leases_list_shows_the_checkpoints_lease_and_drop_lets_fluss_collect_its_snapshots(
    fluss_cluster, writer, store, database, zk_server, tmp_path
):
    table = f"held_{uuid.uuid4().hex[:6]}"
    writer.create_table(table, COLUMNS, ["id"], 1)
    writer.upsert(table, [row(k) for k in range(20)])
    job = f"leases-{uuid.uuid4().hex[:6]}"
    conf = job_conf(tmp_path, job, fluss_cluster.bootstrap_servers, database, zk_server.hosts)
    lease_id = load_or_create_lease_id(str(tmp_path / "ckpt"), job)

    listed = tiering_cli("leases", "list", "--json", "--conf", str(conf))
    text = tiering_cli("leases", "list", "--conf", str(conf))
    every = tiering_cli("leases", "list", "--all", "--conf", str(conf))

    assert listed.returncode == 0, listed.stderr
    (shown,) = json.loads(listed.stdout)
    assert (shown["lease_id"], shown["job"], shown["snapshots"]) == (lease_id, job, None), shown
    assert text.returncode == 0 and lease_id in text.stdout and "Fluss lists no" in text.stdout, text
    assert every.returncode == 2 and "Fluss lists no lease" in every.stderr, every

    dropped: list = []
    _held_then_collected(
        store, writer, table, lease_id, lambda: dropped.append(tiering_cli("leases", "drop", "--conf", str(conf)))
    )
    assert dropped[0].returncode == 0 and lease_id in dropped[0].stdout, dropped[0]


def test_resync_rebuilds_a_table_from_fluss_and_take_over_releases_the_holders_holds(
    fluss_cluster, writer, store, database, zk_server, tmp_path
):
    table = table_with_changes_after_its_snapshot(writer, store, "orders", 60, 1)
    holder = f"holder-{uuid.uuid4().hex[:6]}"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    holder_conf = job_conf(tmp_path / "a", holder, fluss_cluster.bootstrap_servers, database, zk_server.hosts)

    resync = tiering_cli("resync", table, "--conf", str(holder_conf))

    assert resync.returncode == 0, resync.stderr[-3000:]
    assert lake_rows(tmp_path / "a", table) == writer.current_rows(table)
    commit = Lake.at(str(tmp_path / "a" / "lake")).load(table).info
    assert commit is not None and commit.job == holder and commit.epoch == 1

    # another job over the same lake takes the table over: the holder's lease (the one its newest
    # round commit names) lets go of the table's snapshots
    taker = f"taker-{uuid.uuid4().hex[:6]}"
    taker_conf = job_conf(tmp_path / "b", taker, fluss_cluster.bootstrap_servers, database, zk_server.hosts)
    taker_conf.write_text(taker_conf.read_text().replace(str(tmp_path / "b" / "lake"), str(tmp_path / "a" / "lake")))
    taken: list = []
    _held_then_collected(
        store,
        writer,
        table,
        commit.lease_id,
        lambda: taken.append(tiering_cli("take-over", table, "--conf", str(taker_conf))),
    )
    assert taken[0].returncode == 0 and holder in taken[0].stdout, taken[0]
    missing = tiering_cli("take-over", "no_such_table", "--conf", str(taker_conf))
    assert missing.returncode == 1 and "no_such_table" in missing.stderr, missing
