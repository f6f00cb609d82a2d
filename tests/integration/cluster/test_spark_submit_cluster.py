"""`spark-submit` to a real standalone cluster, into an S3 lake: the deployment users run.

Two workers run the executors, which read the store's files and write the lake's data files
straight into S3; the driver makes one fenced commit per table per round. The driver runs in
client mode on a "node": Spark's standalone master refuses Python applications in cluster mode
("Cluster deploy mode is currently not supported for python applications on standalone
clusters", ``SparkSubmit.prepareSubmitEnvironment``), so what ``--deploy-mode cluster
--supervise`` does for a JVM application is done the way Spark allows: a driver that dies is
resubmitted from another node. Each node is a working directory of its own with its own copy of
the config and of the package zip; the checkpoint is on S3 (Spark's part through s3a, the job's
own files through the lake's object store), so the nodes share nothing local. Where this
pyspark's Hadoop does not fit the s3a jars (``.venv-oldest``: tests/support/s3a.py) the
checkpoint is a directory both nodes mount instead.

The first driver is held right after its first Delta commits (the round's tables commit side by
side), before their reports and releases, and its whole process group (spark-submit's JVM and
the Python driver) is SIGKILLed, as a node that dies. The second, submitted from the other node,
must continue under the same lease id (read from the checkpoint), replay the round without
committing a table twice, then tier the changes made in between: three tables with inserts,
updates and deletes equal the store row by row, each round's commit of a table is there once.

A round aborted by Spark, end to end: an executor's JVM is SIGKILLed while its Python worker
reads a bucket of the bootstrap (``spark.task.maxFailures=1``, so the Spark job fails). The
driver must exit 1 with no snapshot held in the store; the next submission re-acquires under
the same lease id, and the lake equals the store with one bootstrap commit per table.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
from collections import Counter
from pathlib import Path

import pytest

from tests.support.config import write_conf
from tests.support.drivers import build_pyfiles_zip
from tests.support.lake import tiering_commits
from tests.support.oracle import TableOracle, assert_lake_equals
from tests.support.s3a import s3a_driver_conf, s3a_jars
from tests.support.waiting import wait_until
from tiering import failpoints
from tiering.delta_log.lake import Lake
from tiering.failpoints import ENV as FAILPOINTS
from tiering.state.checkpoint_store import open_checkpoint
from tiering.state.lease_file import read_lease_id

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
TABLES = ("customers", "items", "orders")
AFTER_COMMIT = "after_delta_commit"


def node(
    tmp_path: Path, name: str, checkpoint: str, kv_store, zk_server, s3_server, s3_root: str
) -> tuple[Path, Path, Path]:
    """A node's working directory with its own config and package zip: (dir, config, zip)."""
    home = tmp_path / name
    home.mkdir()
    conf = write_conf(
        home / "tiering.toml",
        job="cluster-job",
        store_url=kv_store.url,
        zk_hosts=zk_server.hosts,
        checkpoint=checkpoint,
        lake_root=s3_root,
        zookeeper={"session_timeout_s": 6.0},
        lake={"storage": s3_server.storage_options(), "driver_max_changes": 0},
    )
    return home, conf, build_pyfiles_zip(home / "kv_tiering.zip")


def submit_command(cluster, conf: Path, zip_path: Path) -> list[str]:
    return cluster.submit_command(
        REPO / "jobs" / "tiering_job.py",
        "--conf",
        str(conf),
        "--available-now",
        py_files=zip_path,
        conf=s3a_driver_conf() if s3a_jars() else None,
    )


def test_a_driver_killed_on_one_node_continues_on_another_from_the_checkpoint_on_s3(
    spark_cluster, kv_store, zk_server, s3_server, s3_root, tmp_path
):
    client = kv_store.client()
    tables = [TableOracle(client, name, num_buckets=3) for name in TABLES]
    for t in tables:
        t.upsert(range(400))
        client.take_snapshots(t.name)
        t.churn(150, key_space=500)
    lake = Lake.at(s3_root, s3_server.storage_options())
    location = f"{s3_root}-ckpt" if s3a_jars() else str(tmp_path / "mounted" / "ckpt")
    checkpoint = open_checkpoint(location, s3_server.storage_options())

    home_a, conf_a, zip_a = node(tmp_path, "node-a", location, kv_store, zk_server, s3_server, s3_root)
    log_a = home_a / "driver.log"
    with open(log_a, "wb") as out:
        driver = subprocess.Popen(
            submit_command(spark_cluster, conf_a, zip_a),
            cwd=home_a,
            stdout=out,
            env={**spark_cluster.env(), FAILPOINTS: f"{AFTER_COMMIT}=sleep:300"},
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until(
            lambda: failpoints.sleeping(AFTER_COMMIT) in log_a.read_text(errors="replace") or driver.poll() is not None,
            timeout_s=400,
            what="the first driver held right after a Delta commit",
        )
        assert driver.poll() is None, log_a.read_text(errors="replace")[-4000:]
        os.killpg(driver.pid, signal.SIGKILL)  # the node dies: spark-submit's JVM and the Python driver
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(30)
    landed = [len(tiering_commits(lake, name)) for name in TABLES]
    assert max(landed) == 1, f"killed right after its first commits: {landed}"
    lease_id = read_lease_id(checkpoint)
    assert lease_id is not None
    spark_scratch = {"artifacts"}  # Spark 4.0's session artifact directory, in the driver's working directory
    left = {p.name for p in home_a.iterdir()} - spark_scratch
    assert left == {"driver.log", "kv_tiering.zip", "tiering.toml"}, "nothing of the job's state is on the node's disk"
    shutil.rmtree(home_a)  # the node is gone with its disk

    for t in tables:  # the restart replays the killed round, then tiers these as changelog rounds
        t.churn(120, key_space=600)
    home_b, conf_b, zip_b = node(tmp_path, "node-b", location, kv_store, zk_server, s3_server, s3_root)
    again = subprocess.run(
        submit_command(spark_cluster, conf_b, zip_b),
        env=spark_cluster.env(),
        cwd=home_b,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-4000:]
    assert "job 'cluster-job' done after" in again.stdout
    for t in tables:
        assert_lake_equals(lake, t)  # a row lost or tiered twice fails here
        commits = tiering_commits(lake, t.name)
        assert {c.lease_id for c in commits} == {lease_id}, "every run of the job used the checkpoint's lease"
        assert [c.epoch for c in commits] == sorted(c.epoch for c in commits)
        rounds = Counter(c.round for c in commits)
        assert set(rounds.values()) == {1}, f"{t.name}: a round committed twice: {rounds}"
    assert read_lease_id(checkpoint) == lease_id
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
            if b"CoarseGrainedExecutorBackend" in b" ".join(argv) and _flag(argv, b"--app-id") == app.encode():
                # the id by its flag: a bare "0" is also the value of --resourceProfileId in every executor
                if _flag(argv, b"--executor-id") == executor.encode():
                    return int(proc.name)
    return None


def _flag(argv: list[bytes], name: bytes) -> bytes | None:
    """The value after ``name`` in ``argv``, or None."""
    return argv[argv.index(name) + 1] if name in argv[:-1] else None


def test_an_executor_killed_mid_bootstrap_aborts_the_round_and_leaks_no_hold(
    spark_cluster, kv_store, zk_server, tmp_path
):
    client = kv_store.client()
    tables = [TableOracle(client, name, num_buckets=3) for name in ("orders", "items")]
    for t in tables:
        t.upsert(range(300))
        client.take_snapshots(t.name)
        t.churn(100, key_space=400)
    conf = write_conf(
        tmp_path / "tiering.toml",
        job="executor-kill",
        store_url=kv_store.url,
        zk_hosts=zk_server.hosts,
        zookeeper={"session_timeout_s": 6.0},
        lake={"driver_max_changes": 0},
    )
    zip_path = build_pyfiles_zip(tmp_path / "kv_tiering.zip")

    def submit_with(extra: dict[str, str]) -> subprocess.CompletedProcess:
        command = spark_cluster.submit_command(
            REPO / "jobs" / "tiering_job.py",
            "--conf",
            str(conf),
            "--available-now",
            py_files=zip_path,
            conf={"spark.task.maxFailures": "1", **extra},
        )
        return subprocess.run(
            command, env=spark_cluster.env(), cwd=tmp_path, capture_output=True, text=True, timeout=600
        )

    killed: list[int] = []

    def kill_the_executor() -> None:
        pid = wait_until(
            lambda: executor_at_the_point(spark_cluster.directory),
            timeout_s=300,
            what="an executor's worker at the failpoint",
        )
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
