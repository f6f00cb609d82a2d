"""The Airflow DAG, loaded by a real Airflow: the spark-submit command it would run.

Airflow lives in its own virtualenv (scripts/test_airflow.sh makes .venv-airflow); in the
service's .venv this module is skipped. The check goes down to the command line the Spark
provider builds, since that is what a scheduler would execute.
"""

from __future__ import annotations

import importlib.util
import sys
from datetime import timedelta
from pathlib import Path

import pytest

pytest.importorskip(
    "airflow.providers.apache.spark",
    reason="Apache Airflow and its Spark provider are not installed here; run scripts/test_airflow.sh "
    "(it installs them into .venv-airflow and runs these tests)",
)

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DAG_FILE = REPO / "jobs" / "airflow" / "kv_tiering_dag.py"


def load_dag(monkeypatch, **env: str):
    for name in ("KV_TIERING_JOB_SCRIPT", "KV_TIERING_CONF", "KV_TIERING_PY_FILES", "KV_TIERING_PYTHON",
                 "KV_TIERING_SCHEDULE", "KV_TIERING_SPARK_CONN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    spec = importlib.util.spec_from_file_location("kv_tiering_dag_under_test", DAG_FILE)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module.dag


def test_dag_runs_the_job_script_available_now_one_run_at_a_time(monkeypatch):
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    dag = load_dag(monkeypatch, KV_TIERING_CONF="/etc/kv/orders.toml")

    assert dag.dag_id == "kv_tiering"
    assert dag.max_active_runs == 1
    assert dag.catchup is False
    [task] = dag.tasks
    assert isinstance(task, SparkSubmitOperator)
    assert Path(task.application) == REPO / "jobs" / "tiering_job.py" and Path(task.application).is_file()
    assert task.application_args == ["--conf", "/etc/kv/orders.toml", "--available-now"]
    assert task.retries == 4
    assert task.retry_delay == timedelta(seconds=30)
    assert task.retry_exponential_backoff  # a multiplier (2.0) on Airflow 3, a flag on Airflow 2
    assert task.max_retry_delay == timedelta(minutes=10)
    assert task.execution_timeout == timedelta(hours=2)


def test_the_spark_submit_command_ships_the_zip_and_the_interpreter(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_KV_SPARK_TEST", "spark://local")
    dag = load_dag(
        monkeypatch,
        KV_TIERING_CONF="/etc/kv/orders.toml",
        KV_TIERING_PY_FILES="/opt/kv/kv_tiering.zip",
        KV_TIERING_PYTHON="/opt/kv/venv/bin/python",
        KV_TIERING_SPARK_CONN="kv_spark_test",
        KV_TIERING_SCHEDULE="@hourly",
    )
    task = dag.get_task("tier_available_now")

    command = task._get_hook()._build_spark_submit_command(task.application)

    assert command[:3] == ["spark-submit", "--master", "local"]
    assert command[command.index("--py-files") + 1] == "/opt/kv/kv_tiering.zip"
    assert "spark.pyspark.python=/opt/kv/venv/bin/python" in command
    assert "spark.pyspark.driver.python=/opt/kv/venv/bin/python" in command
    assert command[-4:] == [str(REPO / "jobs" / "tiering_job.py"), "--conf", "/etc/kv/orders.toml", "--available-now"]
