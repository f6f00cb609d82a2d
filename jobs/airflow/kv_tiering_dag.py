"""Airflow DAG: scheduled availableNow runs of the tiering job through spark-submit.

Failure modes it is shaped by: two runs of one job at once (the second would only wait as a
ZooKeeper standby, holding a worker slot) — ``max_active_runs=1`` and no catch-up; a passing
outage of the store or ZooKeeper — retries with exponential backoff; a run that hangs —
``execution_timeout``. Each run tiers what is available at its start (``--available-now``)
and exits; the checkpoint makes the next run continue where this one stopped.

Settings come from the environment of the Airflow workers and scheduler (read at parse time,
no metadata-database access while parsing):

    KV_TIERING_JOB_SCRIPT  path of jobs/tiering_job.py        (default: next to this DAG's folder)
    KV_TIERING_CONF        the job's TOML config               (default: /etc/kv-tiering/tiering.toml)
    KV_TIERING_PY_FILES    zip from scripts/build_pyfiles.sh   (default: none; package installed)
    KV_TIERING_PYTHON      interpreter with kv-tiering's deps  (default: Spark's default)
    KV_TIERING_SCHEDULE    cron or preset                      (default: */15 * * * *)
    KV_TIERING_SPARK_CONN  Airflow connection for spark-submit (default: spark_default)
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2
    from airflow import DAG

DAG_ID = "kv_tiering"

_HERE = Path(__file__).resolve().parent
JOB_SCRIPT = os.environ.get("KV_TIERING_JOB_SCRIPT", str(_HERE.parent / "tiering_job.py"))
CONF = os.environ.get("KV_TIERING_CONF", "/etc/kv-tiering/tiering.toml")
PY_FILES = os.environ.get("KV_TIERING_PY_FILES") or None
PYTHON = os.environ.get("KV_TIERING_PYTHON") or None
SCHEDULE = os.environ.get("KV_TIERING_SCHEDULE", "*/15 * * * *")
SPARK_CONN = os.environ.get("KV_TIERING_SPARK_CONN", "spark_default")

default_args = {
    "owner": "data-platform",
    "retries": 4,
    "retry_delay": timedelta(seconds=30),
    "retry_exponential_backoff": 2.0,  # 30 s, 60 s, 120 s, 240 s (a bool `True` on Airflow 2)
    "max_retry_delay": timedelta(minutes=10),
    "execution_timeout": timedelta(hours=2),
}

spark_conf = {"spark.ui.showConsoleProgress": "false"}
if PYTHON:
    spark_conf.update({"spark.pyspark.python": PYTHON, "spark.pyspark.driver.python": PYTHON})

with DAG(
    dag_id=DAG_ID,
    description="Tier KV store tables into Delta Lake (availableNow runs)",
    schedule=SCHEDULE,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args=default_args,
    tags=["kv-tiering"],
) as dag:
    tier = SparkSubmitOperator(
        task_id="tier_available_now",
        conn_id=SPARK_CONN,
        application=JOB_SCRIPT,
        application_args=["--conf", CONF, "--available-now"],
        py_files=PY_FILES,
        conf=spark_conf,
        name="kv-tiering",
    )
