"""The Airflow DAG factory, loaded by a real Airflow: one DAG per config file, the spark-submit
command it would run, and which exit codes are retried.

Airflow lives in its own virtualenvs, the newest and the oldest version the project claims
(scripts/test_airflow.sh makes .venv-airflow and .venv-airflow-oldest and runs these tests in
both); in the service's .venv this module is skipped. The checks go down to the command line the
Spark provider builds and to the exception each exit code ends in, as a scheduler would see them;
`tiering` and `spark-submit` are stand-in scripts exiting with the code under test.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from datetime import timedelta
from pathlib import Path

import pytest

pytest.importorskip(
    "airflow.providers.apache.spark",
    reason="Apache Airflow and its Spark provider are not installed here; run scripts/test_airflow.sh "
    "(it installs them into .venv-airflow and .venv-airflow-oldest and runs these tests)",
)

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DAG_FILE = REPO / "jobs" / "airflow" / "kv_tiering_dag.py"
ENV = (
    "KV_TIERING_CONF_DIR",
    "KV_TIERING_CLI",
    "KV_TIERING_JOB_SCRIPT",
    "KV_TIERING_PY_FILES",
    "KV_TIERING_PYTHON",
    "KV_TIERING_SCHEDULE",
    "KV_TIERING_SPARK_CONN",
    "KV_TIERING_FAIL_AFTER",
)


def load_dag_file(monkeypatch, **env: str):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    spec = importlib.util.spec_from_file_location("kv_tiering_dag_under_test", DAG_FILE)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def write_job(folder: Path, file: str, name: str) -> Path:
    path = folder / file
    path.write_text(f'[job]\nname = "{name}"\ncheckpoint = "/data/{name}/ckpt"\n[lake]\nroot = "/data/lake"\n')
    return path


def stand_in(folder: Path, name: str, code: int) -> Path:
    """An executable ``folder/name`` that records its arguments and exits ``code``."""
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(f'#!/bin/sh\necho "$@" > "{folder}/{name}.args"\necho "{name} says hello"\nexit {code}\n')
    path.chmod(0o755)
    return path


def execute(module, task, fails_fast: bool | None) -> None:
    """Run ``task``: it passes (None), fails keeping its retries (False) or fails at once (True)."""
    if fails_fast is None:
        task.execute({})
        return
    with pytest.raises(module.AirflowException) as raised:
        task.execute({})
    assert isinstance(raised.value, module.AirflowFailException) is fails_fast


def test_one_dag_per_config_file_checked_tiered_then_checked_for_freshness(monkeypatch, tmp_path):
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    orders = write_job(tmp_path, "orders.toml", "orders-job")
    users = write_job(tmp_path, "users.toml", "users-job")
    (tmp_path / "notes.txt").write_text("not a config")
    module = load_dag_file(
        monkeypatch, KV_TIERING_CONF_DIR=str(tmp_path), KV_TIERING_CLI="/opt/kv/bin/tiering", KV_TIERING_FAIL_AFTER="5"
    )

    dags = {k: v for k, v in vars(module).items() if isinstance(v, module.DAG)}
    assert sorted(dags) == ["kv_tiering_orders-job", "kv_tiering_users-job"]
    for conf, dag in ((orders, dags["kv_tiering_orders-job"]), (users, dags["kv_tiering_users-job"])):
        assert dag.max_active_runs == 1 and dag.catchup is False
        assert [t.task_id for t in dag.topological_sort()] == ["check", "tier_available_now", "freshness"]
        check, tier, freshness = (dag.get_task(t) for t in ("check", "tier_available_now", "freshness"))
        assert (check.tiering, check.argv) == ("/opt/kv/bin/tiering", ["check", "--conf", str(conf)])
        assert freshness.argv == ["status", "--conf", str(conf), "--fail-after", "5"]
        assert isinstance(tier, SparkSubmitOperator)
        assert (
            Path(tier.application) == REPO / "tiering" / "jobs" / "tiering_job.py" and Path(tier.application).is_file()
        )
        assert tier.application_args == ["--conf", str(conf), "--available-now"]
        assert tier.retries == 4
        assert tier.retry_delay == timedelta(seconds=30)
        assert tier.retry_exponential_backoff  # a multiplier (2.0) on Airflow 3, a flag on Airflow 2
        assert tier.max_retry_delay == timedelta(minutes=10)
        assert tier.execution_timeout == timedelta(hours=2)


def test_a_config_without_a_readable_job_name_still_gets_a_dag_whose_check_fails(monkeypatch, tmp_path):
    """The config error shows as that DAG's failed check, not as an import error of every DAG."""
    (tmp_path / "broken conf.toml").write_text("[job\nname = ")
    write_job(tmp_path, "orders.toml", "orders-job")
    module = load_dag_file(monkeypatch, KV_TIERING_CONF_DIR=str(tmp_path))
    assert sorted(module.make_dags(tmp_path)) == ["kv_tiering_broken_conf", "kv_tiering_orders-job"]


def test_two_files_of_one_job_are_an_import_error_naming_both(monkeypatch, tmp_path):
    module = load_dag_file(monkeypatch, KV_TIERING_CONF_DIR=str(tmp_path))
    write_job(tmp_path, "a.toml", "orders-job")
    write_job(tmp_path, "b.toml", "orders-job")
    with pytest.raises(ValueError, match=r"b\.toml and .*a\.toml both make DAG 'kv_tiering_orders-job'"):
        module.make_dags(tmp_path)


def test_no_config_folder_no_dags(monkeypatch, tmp_path):
    module = load_dag_file(monkeypatch, KV_TIERING_CONF_DIR=str(tmp_path / "absent"))
    assert module.make_dags(tmp_path / "absent") == {}


@pytest.mark.parametrize(
    "task_id, code, fails_fast",
    [
        ("check", 0, None),
        ("check", 1, False),
        ("check", 2, True),
        ("freshness", 0, None),
        ("freshness", 1, False),
        ("freshness", 2, True),
        ("freshness", 3, True),
    ],
)
def test_tiering_command_exit_codes_retried_or_not(monkeypatch, tmp_path, task_id, code, fails_fast):
    """Exit 1 (a dependency down) keeps the task's retries; 2 (config) and status's 3 (tables
    failing) fail it at once."""
    module = load_dag_file(monkeypatch)
    tiering = stand_in(tmp_path / "bin", "tiering", code)
    conf = write_job(tmp_path, "orders.toml", "orders-job")
    task = module.make_dags(tmp_path, tiering=str(tiering))["kv_tiering_orders-job"].get_task(task_id)

    execute(module, task, fails_fast)
    assert (tmp_path / "bin" / "tiering.args").read_text().split()[:3] == [task.argv[0], "--conf", str(conf)]


@pytest.mark.parametrize("code, fails_fast", [(0, None), (1, False), (2, True)])
def test_the_job_s_exit_2_through_spark_submit_is_not_retried(monkeypatch, tmp_path, code, fails_fast):
    """The Spark provider's hook runs `spark-submit` from PATH: here one exiting ``code``."""
    module = load_dag_file(monkeypatch)
    bin_dir = tmp_path / "bin"
    stand_in(bin_dir, "spark-submit", code)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("AIRFLOW_CONN_KV_SPARK_TEST", "spark://local")
    write_job(tmp_path, "orders.toml", "orders-job")
    task = module.make_dags(tmp_path, spark_conn="kv_spark_test")["kv_tiering_orders-job"].get_task(
        "tier_available_now"
    )

    execute(module, task, fails_fast)
    assert (bin_dir / "spark-submit.args").read_text().split()[-3:] == [
        "--conf",
        str(tmp_path / "orders.toml"),
        "--available-now",
    ]


def test_the_spark_submit_command_ships_the_zip_and_the_interpreter(monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_CONN_KV_SPARK_TEST", "spark://local")
    conf = write_job(tmp_path, "orders.toml", "orders-job")
    module = load_dag_file(
        monkeypatch,
        KV_TIERING_CONF_DIR=str(tmp_path),
        KV_TIERING_JOB_SCRIPT="/opt/kv/venv/lib/python3.11/site-packages/tiering/jobs/tiering_job.py",
        KV_TIERING_PY_FILES="/opt/kv/kv_tiering.zip",
        KV_TIERING_PYTHON="/opt/kv/venv/bin/python",
        KV_TIERING_SPARK_CONN="kv_spark_test",
        KV_TIERING_SCHEDULE="@hourly",
    )
    task = getattr(module, "kv_tiering_orders-job").get_task("tier_available_now")

    command = task._get_hook()._build_spark_submit_command(task.application)

    assert command[:3] == ["spark-submit", "--master", "local"]
    assert command[command.index("--py-files") + 1] == "/opt/kv/kv_tiering.zip"
    assert "spark.pyspark.python=/opt/kv/venv/bin/python" in command
    assert "spark.pyspark.driver.python=/opt/kv/venv/bin/python" in command
    assert command[command.index("--name") + 1] == "kv-tiering-orders-job"
    assert command[-4:] == [
        "/opt/kv/venv/lib/python3.11/site-packages/tiering/jobs/tiering_job.py",
        "--conf",
        str(conf),
        "--available-now",
    ]
