"""The manual's packed virtualenv (docs/deploying.md, "Shipping the Python dependencies"), run as it
is written, on a standalone cluster in client mode: the wheel's virtualenv packed with venv-pack
(pyspark left out: Spark puts its own on every Python process's path), shipped to the executors
with ``--archives ENV#environment``, and ``PYSPARK_PYTHON=./environment/bin/python`` for the driver
and the executors.

Spark 4 plans a Python source in Python processes the driver's JVM starts with that same
interpreter, from the driver's working directory: there the job refuses to start in one line
(exit 2) until the environment is unpacked there too, as the manual says; then the job tiers a
table with the packed environment's ``tiering`` on the driver and its interpreter everywhere. The
spark-submit runs without ``PYTHONPATH`` or ``PYSPARK_DRIVER_PYTHON``, so nothing but the packed
environment can serve it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.config import write_conf
from tests.support.oracle import TableOracle, assert_lake_equals
from tiering.cli import EXIT_OK, EXIT_USAGE

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
PACKED_PYTHON = "./environment/bin/python"


def test_the_packed_virtualenv_tiers_on_a_cluster_once_the_driver_has_its_copy(
    installed_wheel, spark_cluster, kv_store, zk_server, unique_job, tmp_path
):
    client = kv_store.client()
    orders = TableOracle(client, "orders", num_buckets=2)
    orders.upsert(range(60))
    client.take_snapshots(orders.name)
    orders.churn(20, key_space=80)
    conf = write_conf(tmp_path / "tiering.toml", job=unique_job, store_url=kv_store.url, zk_hosts=zk_server.hosts)
    archive = tmp_path / "kv_tiering_env.tar.gz"
    pack = [sys.executable, "-m", "venv_pack", "-q", "-p", str(installed_wheel.venv)]
    packed = subprocess.run(
        [*pack, "--exclude", "lib/python*/site-packages/pyspark/*", "-o", str(archive)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert packed.returncode == 0, packed.stderr[-3000:]
    driver = tmp_path / "driver"  # where spark-submit runs: the driver's working directory
    driver.mkdir()
    env = {
        **{k: v for k, v in spark_cluster.env().items() if k not in ("PYTHONPATH", "PYSPARK_DRIVER_PYTHON")},
        "PYSPARK_PYTHON": PACKED_PYTHON,
    }
    command = spark_cluster.submit_command(
        REPO / "jobs" / "tiering_job.py", "--conf", str(conf), "--available-now", archives=f"{archive}#environment"
    )

    def submit(**variables: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            command, env={**env, **variables}, cwd=driver, capture_output=True, text=True, timeout=600
        )

    # the driver's Python a virtualenv of its own: its JVM finds no ./environment to plan with
    refused = submit(PYSPARK_DRIVER_PYTHON=str(installed_wheel.venv / "bin" / "python"))
    output = refused.stdout + refused.stderr  # spark-submit merges the Python driver's stderr into its stdout
    assert refused.returncode == EXIT_USAGE, _without_java_frames(output)[-4000:]
    assert f"PYSPARK_PYTHON='{PACKED_PYTHON}': no such interpreter in the driver's directory {driver}" in output
    assert "Traceback" not in output and not (tmp_path / "lake").exists()

    (driver / "environment").mkdir()
    subprocess.run(["tar", "-xzf", str(archive), "-C", "environment"], cwd=driver, check=True, timeout=300)
    done = submit()

    assert done.returncode == EXIT_OK, _without_java_frames(done.stdout + done.stderr)[-4000:]
    [origin] = [line for line in done.stdout.splitlines() if line.startswith("tiering_job: tiering package from")]
    assert Path(origin.rsplit(" ", 1)[1]).resolve().is_relative_to((driver / "environment").resolve()), origin
    assert f"job {unique_job!r} done after" in done.stdout
    assert_lake_equals(tmp_path / "lake", orders)


def _without_java_frames(output: str) -> str:
    """spark-submit's output without the frames of Java's stack traces: their messages and causes."""
    return "\n".join(line for line in output.splitlines() if not line.lstrip().startswith("at "))
