"""`tiering status` of a job over a real Apache Fluss database (docs/DESIGN.md §8): what it can show
without a listing of the lease's holds (Fluss has none): each table's lake position against Fluss's
log ends, its lag and freshness, the leader's epoch and the lease id the checkpoint keeps.
"""

from __future__ import annotations

import io
import json
import threading
import uuid

import pytest
from rich.console import Console

from tests.support.drivers import Driver, tiering_cli
from tests.support.fluss_job import BUCKETS, COLUMNS, job_conf, row
from tiering.conf.loader import load_config
from tiering.delta_log.lake import Lake
from tiering.fluss import store as fluss_store
from tiering.ops.status_view import watch_status
from tiering.state.lease_file import load_or_create_lease_id

pytestmark = pytest.mark.integration

pytest.importorskip("fluss")


def test_status_shows_a_fluss_jobs_lake_against_the_log_ends(
    fluss_cluster, writer, store, database, zk_server, tmp_path
):
    writer.create_table("orders", COLUMNS, ["id"], BUCKETS)
    writer.upsert("orders", [row(k) for k in range(150)])
    job = f"status-{uuid.uuid4().hex[:6]}"
    conf = job_conf(tmp_path, job, fluss_cluster.bootstrap_servers, database, zk_server.hosts)
    run = Driver(conf, available_now=True)
    assert run.wait(300) == 0, run.tail()
    writer.upsert("orders", [row(k, 1) for k in range(0, 150, 4)])  # written after the run: lag

    listed = tiering_cli("status", "--json", "--conf", str(conf))
    text = tiering_cli("status", "--conf", str(conf))

    assert listed.returncode == 0, listed.stderr
    shown = json.loads(listed.stdout)
    lease_id = load_or_create_lease_id(str(tmp_path / "ckpt"), job)
    assert (shown["job"], shown["epoch"], shown["lease_id"]) == (job, 1, lease_id)
    (orders,) = shown["tables"]
    ends = store.log_ends(["orders"])["orders"]
    lake = Lake.at(str(tmp_path / "lake")).load("orders")
    position = lake.position(ends.table_id)
    assert position is not None, "the run tiered orders"
    assert orders["table"] == "orders" and orders["table_id"] == ends.table_id and orders["buckets"] == BUCKETS
    assert orders["log_end"] == sum(b.end for b in ends.buckets.values())
    assert orders["lake_offset"] == sum(position.buckets.values())
    assert orders["lag"] == orders["log_end"] - orders["lake_offset"] > 0, orders
    assert orders["freshness_s"] is not None and orders["freshness_s"] >= 0, orders
    assert orders["state"] == "ok" and orders["lake_epoch"] == 1 and orders["lake_version"] == lake.info.delta_version
    assert orders["leased_snapshots"] is None, "Fluss lists no lease's holds"
    assert text.returncode == 0, text.stderr
    assert "orders" in text.stdout and lease_id in text.stdout, text.stdout


def test_a_watch_over_fluss_makes_one_store_and_one_changelog_reader_for_all_its_refreshes(
    fluss_cluster, writer, store, database, zk_server, tmp_path, monkeypatch
):
    """Each refresh reads every table's log ends and, for a table that lags, its changelog's first
    change (freshness): through the watch's one store and its one reader, not new connections (and
    a gateway JVM where the process has none with Fluss's client) per refresh."""
    table = f"watched_{uuid.uuid4().hex[:6]}"
    writer.create_table(table, COLUMNS, ["id"], BUCKETS)
    writer.upsert(table, [row(k) for k in range(30)])  # never tiered: it lags from the log's start
    job = f"watch-{uuid.uuid4().hex[:6]}"
    conf = job_conf(tmp_path, job, fluss_cluster.bootstrap_servers, database, zk_server.hosts)
    made: list[str] = []
    connections = fluss_store._Connections
    real_init = connections.__init__

    def counted(self, *args, **kwargs):
        made.append(type(self).__name__)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(connections, "__init__", counted)
    stop, refreshes = threading.Event(), io.StringIO()

    class ThreeRefreshes(Console):
        def print(self, *objects, **kwargs):
            super().print(*objects, **kwargs)
            if refreshes.getvalue().count(table) >= 3:
                stop.set()

    watch_status(load_config(conf), 0.1, ThreeRefreshes(file=refreshes, width=400), timeout_s=10, stop=stop)

    shown = refreshes.getvalue()
    assert shown.count(table) == 3 and "refresh failed" not in shown, shown
    assert sorted(made) == ["FlussBucketReader", "FlussStore"], made
