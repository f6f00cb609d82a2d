"""`spark-submit jobs/tiering_job.py --conf ...` tiers tables end to end (local mode).

The real spark-submit (pyspark ships it in .venv/bin) runs the job with the `tiering` package
shipped as a `--py-files` zip built by the documented command; the job names the copy it
imported, so the test knows the zip, not the editable install, was used.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.config import write_conf
from tests.support.drivers import build_pyfiles_zip
from tests.support.oracle import TableOracle, assert_lake_equals

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]


def test_spark_submit_with_py_files_zip_tiers_every_table(kv_store, zk_server, tmp_path):
    client = kv_store.client()
    orders = TableOracle(client, "orders", num_buckets=3)
    users = TableOracle(client, "users", num_buckets=2)
    for t in (orders, users):
        t.upsert(range(120))
        client.take_snapshots(t.name)
        t.churn(40, key_space=160)
    conf = write_conf(
        tmp_path / "tiering.toml",
        job="submit-job",
        store_url=kv_store.url,
        zk_hosts=zk_server.hosts,
        zookeeper={"session_timeout_s": 6.0},
        spark={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"},
    )
    zip_path = build_pyfiles_zip(tmp_path / "kv_tiering.zip")

    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERING_")}
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "spark-submit"),
            "--master",
            "local[2]",
            "--py-files",
            str(zip_path),
            str(REPO / "jobs" / "tiering_job.py"),
            "--conf",
            str(conf),
            "--available-now",
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert done.returncode == 0, done.stdout[-4000:]
    # spark-submit merges the Python driver's stderr into its stdout.
    [origin] = [line for line in done.stdout.splitlines() if line.startswith("tiering_job: tiering package from")]
    assert origin == f"tiering_job: tiering package from {zip_path}/tiering/__init__.py"
    assert "job 'submit-job' done after" in done.stdout
    for t in (orders, users):
        assert_lake_equals(tmp_path / "lake", t)
    assert client.list_leases() == [], "the clean stop dropped the lease"


def test_tiering_submit_logs_no_spark_info(kv_store, zk_server, tmp_path):
    """`tiering submit` from any install: the job's lines, Spark's warnings, none of its INFO."""
    orders = TableOracle(kv_store.client(), "orders", num_buckets=1)
    orders.upsert(range(20))
    conf = write_conf(
        tmp_path / "tiering.toml",
        job="submit-quiet",
        store_url=kv_store.url,
        zk_hosts=zk_server.hosts,
        spark={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERING_")}
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    argv = ["submit", "--conf", str(conf), "--available-now", "--", "--master", "local[2]"]
    done = subprocess.run(
        [sys.executable, "-m", "tiering.cli", *argv], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )

    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "job 'submit-quiet' done after" in output
    spark_info = [line for line in output.splitlines() if " INFO " in line and " tiering" not in line]
    assert spark_info == [], f"{len(spark_info)} lines of Spark INFO, e.g. {spark_info[:3]}"
    assert_lake_equals(tmp_path / "lake", orders)
