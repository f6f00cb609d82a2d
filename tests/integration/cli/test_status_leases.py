"""`tiering status` and `tiering leases list|drop` against a real store, ZooKeeper and lake.

The job tiers once (in-process), then the store moves on and a crashed driver's lease is left
behind: status must show exactly that lag and that holding, and drop must refuse while a
leader runs and free the snapshots once none does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.support.config import make_config, write_conf
from tests.support.drivers import tiering_cli
from tests.support.oracle import TableOracle
from tiering.cli import EXIT_FAILURE, EXIT_OK, OPERATOR_TIMEOUT_S
from tiering.coord.leader import acquire_leadership
from tiering.job import run_as_leader
from tiering.kvstore.models import SnapshotRef
from tiering.state.lease_file import read_lease_id

pytestmark = pytest.mark.integration


def test_status_and_leases_show_lag_leader_and_holdings(spark, kv_store, zk_server, unique_job, tmp_path):
    client = kv_store.client()
    orders = TableOracle(client, "orders", num_buckets=3)
    users = TableOracle(client, "users", num_buckets=2)
    for t in (orders, users):
        t.upsert(range(60))
        client.take_snapshots(t.name)
    config = make_config(tmp_path, kv_store.url, zk_server.hosts, job=unique_job)
    assert run_as_leader(config).ok
    tiered = {t: sum(b.log_end_offset for b in client.log_info(t).buckets) for t in ("orders", "users")}
    orders.upsert(range(100, 125))  # 25 changes the lake does not have
    snapshots = client.take_snapshots("users").buckets
    lease_id = read_lease_id(config.job.checkpoint)
    client.acquire_lease(
        lease_id,
        1,
        60_000,
        [SnapshotRef(table_id=users.info.table_id, bucket=s.bucket, snapshot_id=s.snapshot_id) for s in snapshots],
    )  # what a driver killed mid-round leaves behind
    conf = write_conf(
        tmp_path / "tiering.toml",
        job=unique_job,
        checkpoint=config.job.checkpoint,
        lake_root=config.lake.root,
        store_url=kv_store.url,
        zk_hosts=zk_server.hosts,
    )

    status = tiering_cli("status", "--conf", str(conf), "--json")
    assert status.returncode == EXIT_OK, status.stderr
    report = json.loads(status.stdout)
    assert (report["epoch"], report["leader"], report["lease_id"]) == (1, None, lease_id)
    by_table = {t["table"]: t for t in report["tables"]}
    assert by_table["orders"]["lake_offset"] == tiered["orders"]
    assert by_table["orders"]["log_end"] == tiered["orders"] + 25
    assert by_table["orders"]["lag"] == 25
    assert (by_table["users"]["lag"], by_table["users"]["leased_snapshots"]) == (0, 2)
    assert by_table["orders"]["leased_snapshots"] == 0
    assert {t: (by_table[t]["state"], by_table[t]["store_columns"], by_table[t]["lake_columns"]) for t in by_table} == {
        "orders": ("ok", 4, 4),
        "users": ("ok", 4, 4),
    }
    assert by_table["users"]["freshness_s"] == 0.0, "the lake holds every write of users"
    assert 0 < by_table["orders"]["freshness_s"] < 120, "orders lacks the 25 writes made moments ago"
    assert by_table["orders"]["lake_commit_ms"] / 1000 <= time.time()

    table_view = tiering_cli("status", "--conf", str(conf))
    assert table_view.returncode == EXIT_OK and "orders" in table_view.stdout and "leader none" in table_view.stdout
    assert_status_runs_without_pyspark(conf)

    listing = tiering_cli("leases", "list", "--conf", str(conf), "--json")
    assert listing.returncode == EXIT_OK, listing.stderr
    assert [(lease["lease_id"], len(lease["snapshots"])) for lease in json.loads(listing.stdout)] == [(lease_id, 2)]
    shown = tiering_cli("leases", "list", "--conf", str(conf))
    assert f"{lease_id} *" in shown.stdout, shown.stdout
    assert "* the lease in this job's checkpoint: the one its runs hold snapshots with" in shown.stdout, shown.stdout

    term = acquire_leadership(zk_server.hosts, unique_job, 10.0)
    try:
        led = tiering_cli("status", "--conf", str(conf), "--json")
        assert (json.loads(led.stdout)["epoch"], json.loads(led.stdout)["leader"] is not None) == (2, True)
        refused = tiering_cli("leases", "drop", "--conf", str(conf))
        assert refused.returncode == EXIT_FAILURE
        assert f"job {unique_job!r} is led by" in refused.stderr and "--force" in refused.stderr
        assert [lease.lease_id for lease in client.list_leases()] == [lease_id], "nothing dropped"
    finally:
        term.resign()

    dropped = tiering_cli("leases", "drop", "--conf", str(conf))
    assert dropped.returncode == EXIT_OK, dropped.stderr
    assert f"dropped lease '{lease_id}'" in dropped.stdout
    assert client.list_leases() == []
    again = tiering_cli("leases", "drop", "--conf", str(conf))
    assert again.returncode == EXIT_FAILURE and "does not exist" in again.stderr


def assert_status_runs_without_pyspark(conf) -> None:
    """`tiering status` is for operators' machines and monitoring scripts: no JVM, no pyspark."""
    probe = (
        "import sys\n"
        "from tiering.cli import main\n"
        "try:\n    main(['status', '--help'])\nexcept SystemExit:\n    pass\n"
        "print('after help:', 'pyspark' in sys.modules)\n"
        f"code = main(['status', '--conf', {str(conf)!r}, '--json'])\n"
        "print('after status:', code, 'pyspark' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERING_")}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120).stdout
    assert "after help: False" in out and "after status: 0 False" in out, out[-2000:]


def test_unreachable_zookeeper_exits_1_naming_the_host_and_writes_nothing(kv_store, tmp_path):
    from tiering.ports import free_port

    TableOracle(kv_store.client(), "orders", num_buckets=1)
    hosts = f"127.0.0.1:{free_port()}"
    conf = write_conf(
        tmp_path / "tiering.toml",
        job="unreachable",
        store_url=kv_store.url,
        zk_hosts=hosts,
        zookeeper={"session_timeout_s": 2.0},
    )

    run = tiering_cli("run", "--conf", str(conf), "--available-now")
    assert run.returncode == EXIT_FAILURE, run.stderr[-2000:]
    assert f"cannot connect to ZooKeeper at {hosts}" in run.stderr
    assert not (tmp_path / "ckpt").exists() and not (tmp_path / "lake").exists()


@pytest.mark.parametrize("command", [("status",), ("leases", "drop", "timeouts-" + "a" * 32)], ids=" ".join)
def test_operator_commands_give_up_on_zookeeper_after_their_timeout(kv_store, tmp_path, command):
    """``--timeout 1`` against a ZooKeeper that never answers: exit 1 naming the host, well before
    the default timeout would have ended the wait."""
    from tiering.ports import free_port

    hosts = f"127.0.0.1:{free_port()}"
    conf = write_conf(tmp_path / "tiering.toml", job="timeouts", store_url=kv_store.url, zk_hosts=hosts)

    started = time.monotonic()
    done = tiering_cli(*command, "--conf", str(conf), "--timeout", "1")
    waited = time.monotonic() - started
    assert done.returncode == EXIT_FAILURE, done.stderr[-2000:]
    assert hosts in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr[-2000:]
    assert waited < OPERATOR_TIMEOUT_S, f"{' '.join(command)} waited {waited:.1f} s with --timeout 1"


def test_lease_tooling_names_each_lease_by_its_own_job_never_by_prefix(kv_store, zk_server, unique_job, tmp_path):
    """Jobs ``J`` and ``J-eu``: ``J`` lists only its own lease, ``--all`` both with their jobs, and a
    drop of ``J-eu``'s lease from ``J`` is refused naming ``J-eu`` unless forced while it has no leader."""
    client = kv_store.client()
    table = TableOracle(client, "orders", num_buckets=1)
    table.upsert(range(10))
    snapshot = client.take_snapshots("orders").buckets[0]
    held = [SnapshotRef(table_id=table.info.table_id, bucket=0, snapshot_id=snapshot.snapshot_id)]
    mine, eu_job = f"{unique_job}-{'a' * 32}", f"{unique_job}-eu"
    theirs = f"{eu_job}-{'b' * 32}"
    for lease_id in (mine, theirs):
        client.acquire_lease(lease_id, 1, 60_000, held)
    conf = write_conf(tmp_path / "tiering.toml", job=unique_job, store_url=kv_store.url, zk_hosts=zk_server.hosts)

    listed = tiering_cli("leases", "list", "--conf", str(conf), "--json")
    assert listed.returncode == EXIT_OK, listed.stderr
    assert [(x["lease_id"], x["job"]) for x in json.loads(listed.stdout)] == [(mine, unique_job)]
    every = tiering_cli("leases", "list", "--conf", str(conf), "--all", "--json")
    assert {(x["lease_id"], x["job"]) for x in json.loads(every.stdout)} >= {(mine, unique_job), (theirs, eu_job)}
    table_view = tiering_cli("leases", "list", "--conf", str(conf), "--all")
    assert eu_job in table_view.stdout and "job" in table_view.stdout.splitlines()[1]

    refused = tiering_cli("leases", "drop", "--conf", str(conf), theirs)
    assert refused.returncode == EXIT_FAILURE and f"job {eu_job!r}'s" in refused.stderr, refused.stderr
    with acquire_leadership(zk_server.hosts, eu_job, 5.0, timeout_s=10):
        forced_while_led = tiering_cli("leases", "drop", "--conf", str(conf), theirs, "--force")
        assert forced_while_led.returncode == EXIT_FAILURE and f"job {eu_job!r} is led by" in forced_while_led.stderr
    assert {x.lease_id for x in client.list_leases()} >= {mine, theirs}, "nothing dropped yet"
    forced = tiering_cli("leases", "drop", "--conf", str(conf), theirs, "--force")
    assert forced.returncode == EXIT_OK, forced.stderr
    assert theirs not in {x.lease_id for x in client.list_leases()} and mine in {
        x.lease_id for x in client.list_leases()
    }
