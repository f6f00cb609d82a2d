"""`spark-submit` to a real standalone cluster, into an S3 lake: the deployment users run.

The driver runs on this machine (client mode, the checkpoint on its disk); two workers run the
executors, which read the store's files and write the lake's data files straight into S3; the
driver makes one fenced commit per table per round. Three tables with inserts, updates and
deletes must land row by row. The first driver is SIGKILLed mid-round (right after a table's
commit, before its report and release); the next submission reuses its lease id, replays the
round without committing that table twice, then tiers the changes made in between.

A round aborted by Spark, end to end: an executor's JVM is SIGKILLed while its Python worker
reads a bucket of the bootstrap (``spark.task.maxFailures=1``, so the Spark job fails). The
driver must exit 1 with no snapshot held in the store; the next submission re-acquires under
the same lease id, and the lake equals the store with one bootstrap commit per table.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from tests.support.config import write_conf
from tests.support.drivers import build_pyfiles_zip
from tests.support.lake import tiering_commits
from tests.support.oracle import TableOracle, assert_lake_equals
from tests.support.waiting import wait_until
from tiering import failpoints
from tiering.failpoints import ENV as FAILPOINTS
from tiering.lakestate.lake import Lake
from tiering.state.lease_file import read_lease_id

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
TABLES = ("customers", "items", "orders")


def submit(cluster, zip_path: Path, conf: Path, cwd: Path, failpoint: str | None = None) -> subprocess.CompletedProcess:
    env = cluster.env()
    if failpoint:
        env[FAILPOINTS] = failpoint
    command = cluster.submit_command(REPO / "jobs" / "tiering_job.py", "--conf", str(conf), "--available-now",
                                     py_files=zip_path)
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)


def test_spark_submit_on_a_cluster_tiers_into_s3_and_survives_a_driver_kill(
    spark_cluster, kv_store, zk_server, s3_server, s3_root, tmp_path
):
    client = kv_store.client()
    tables = [TableOracle(client, name, num_buckets=3) for name in TABLES]
    for t in tables:
        t.upsert(range(400))
        client.take_snapshots(t.name)
        t.churn(150, key_space=500)
    conf = write_conf(
        tmp_path / "tiering.toml", job="cluster-job", store_url=kv_store.url, zk_hosts=zk_server.hosts, lake_root=s3_root,
        zookeeper={"session_timeout_s": 6.0}, lake={"storage": s3_server.storage_options(), "driver_max_changes": 0},
    )
    zip_path = build_pyfiles_zip(tmp_path / "kv_tiering.zip")
    lake = Lake.at(s3_root, s3_server.storage_options())

    killed = submit(spark_cluster, zip_path, conf, tmp_path, failpoint="after_delta_commit")
    assert killed.returncode != 0 and "done after" not in killed.stdout, killed.stdout[-4000:]
    assert any(len(tiering_commits(lake, name)) == 1 for name in TABLES), "killed right after a table's commit"
    lease_id = read_lease_id(str(tmp_path / "ckpt"))
    assert lease_id is not None

    for t in tables:  # the restart replays the killed round, then tiers these as changelog rounds
        t.churn(120, key_space=600)
    again = submit(spark_cluster, zip_path, conf, tmp_path)
    assert again.returncode == 0, again.stdout[-4000:]
    assert "job 'cluster-job' done after" in again.stdout
    for t in tables:
        assert_lake_equals(lake, t)  # duplicates fail here too
        commits = tiering_commits(lake, t.name)
        assert {c.lease_id for c in commits} == {lease_id}, "every run of the job used the checkpoint's lease"
        assert [c.epoch for c in commits] == sorted(c.epoch for c in commits)
    assert read_lease_id(str(tmp_path / "ckpt")) == lease_id
    assert client.list_leases() == [], "the clean stop dropped the lease"


POINT = "executor_bucket_write"


def executor_at_the_point(cluster_dir: Path) -> int | None:
    """The pid of an executor JVM whose Python worker sleeps at :data:`POINT`, found by its log
    (``<worker dir>/<app>/<executor id>/stderr``) and its command line."""
    for stderr in cluster_dir.glob("worker*/app-*/*/stderr"):
        if failpoints.sleeping(POINT) not in stderr.read_text(errors="replace"):
            continue
        app, executor = stderr.parent.parent.name, stderr.parent.name
        for proc in Path("/proc").iterdir():
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"CoarseGrainedExecutorBackend" in b" ".join(argv) and app.encode() in argv and executor.encode() in argv:
                return int(proc.name)
    return None


def test_an_executor_killed_mid_bootstrap_aborts_the_round_and_leaks_no_hold(spark_cluster, kv_store, zk_server, tmp_path):
    client = kv_store.client()
    tables = [TableOracle(client, name, num_buckets=3) for name in ("orders", "items")]
    for t in tables:
        t.upsert(range(300))
        client.take_snapshots(t.name)
        t.churn(100, key_space=400)
    conf = write_conf(tmp_path / "tiering.toml", job="executor-kill", store_url=kv_store.url, zk_hosts=zk_server.hosts,
                      zookeeper={"session_timeout_s": 6.0}, lake={"driver_max_changes": 0})
    zip_path = build_pyfiles_zip(tmp_path / "kv_tiering.zip")

    def submit_with(extra: dict[str, str]) -> subprocess.CompletedProcess:
        command = spark_cluster.submit_command(REPO / "jobs" / "tiering_job.py", "--conf", str(conf), "--available-now",
                                               py_files=zip_path, conf={"spark.task.maxFailures": "1", **extra})
        return subprocess.run(command, env=spark_cluster.env(), cwd=tmp_path, capture_output=True, text=True,
                              timeout=600)

    killed: list[int] = []

    def kill_the_executor() -> None:
        pid = wait_until(lambda: executor_at_the_point(spark_cluster.directory), timeout_s=300,
                         what="an executor's worker at the failpoint")
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    killer = threading.Thread(target=kill_the_executor, daemon=True)
    killer.start()
    aborted = submit_with({f"spark.executorEnv.{failpoints.ENV}": f"{POINT}=sleep:60"})
    killer.join(10)

    assert killed, "no executor was killed at the failpoint"
    assert aborted.returncode == 1, aborted.stdout[-3000:] + aborted.stderr[-3000:]
    assert all(tiering_commits(tmp_path / "lake", t.name) == [] for t in tables), "nothing of the round landed"
    assert all(lease.snapshots == [] for lease in client.list_leases()), "the aborted round's holds were let go"
    lease_id = read_lease_id(str(tmp_path / "ckpt"))

    again = submit_with({})
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    for t in tables:
        assert_lake_equals(tmp_path / "lake", t)
        commits = tiering_commits(tmp_path / "lake", t.name)
        assert len(commits) == 1 and commits[0].lease_id == lease_id, "one bootstrap commit, under the kept lease"
    assert client.list_leases() == [], "the clean stop dropped the lease"
