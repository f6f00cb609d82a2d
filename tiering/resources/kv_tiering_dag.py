"""Airflow DAGs: one per tiering job, each a scheduled availableNow run checked before and after.

One DAG per config file (``*.toml``) in a folder, its id ``kv_tiering_<job name>`` (``[job] name``
read from the file); each run is three tasks:

    check  (tiering check --conf F)  >>  tier_available_now (spark-submit)  >>  freshness
                                                               (tiering status --conf F --fail-after N)

Failure modes it is shaped by: a bad config (exit 2) — failed at once, never retried, whichever
task sees it: a retry cannot change the file (:class:`TieringCommandOperator`,
:class:`TieringSubmitOperator`; the Spark provider reports the exit code only in its error's text,
"Error code is: N"); a passing outage of the store or ZooKeeper (exit 1) — retried with exponential
backoff; tables that keep failing (``tiering status`` exit 3) — the run fails, not retried, so the
alert is the DAG's; two runs of one job at once (the second would only wait as a ZooKeeper standby,
holding a worker slot) — ``max_active_runs=1`` and no catch-up; a run that hangs —
``execution_timeout``. Each run tiers what is available at its start and exits; the checkpoint
makes the next run continue where this one stopped. A file whose job name cannot be read still
gets a DAG (id from the file name) whose ``check`` fails with the config error; two files naming
one job are an import error naming both.

This file imports only Airflow and the standard library: the job's own install (``tiering`` and
pyspark) may be another virtualenv, named by the settings below. Settings come from the
environment of the Airflow workers and scheduler (read at parse time, no metadata-database
access while parsing), or call :func:`make_dags` from a DAG file of your own. ``tiering airflow-dag``
writes this file with ``INSTALL`` naming the install it ran in, so the defaults below find it:

    KV_TIERING_CONF_DIR    folder of the jobs' TOML configs        (default: /etc/kv-tiering)
    KV_TIERING_CLI         the `tiering` command of the job's install (default: INSTALL's)
    KV_TIERING_JOB_SCRIPT  the spark-submit application, the install's tiering/jobs/tiering_job.py
                                                                   (default: INSTALL's)
    KV_TIERING_PY_FILES    zip from scripts/build_pyfiles.sh       (default: none; package installed)
    KV_TIERING_PYTHON      interpreter with kv-tiering's deps      (default: Spark's default)
    KV_TIERING_SCHEDULE    cron or preset                          (default: */15 * * * *)
    KV_TIERING_SPARK_CONN  Airflow connection for spark-submit     (default: spark_default)
    KV_TIERING_FAIL_AFTER  freshness: rounds a table may fail in a row (default: 3)
"""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

try:
    from airflow.sdk import DAG, BaseOperator
    from airflow.sdk.exceptions import AirflowException, AirflowFailException

    BACKOFF: float | bool = 2.0  # the delay's multiplier
except ImportError:  # Airflow 2
    from airflow import DAG
    from airflow.exceptions import AirflowException, AirflowFailException
    from airflow.models import BaseOperator

    BACKOFF = True  # a flag (its type is checked): the delay doubles

#: The `tiering` command's exit codes that a retry cannot change: a bad config or usage (2), and
#: from `tiering status`, tables failing round after round (3). Exit 1 (a dependency down) is retried.
EXIT_USAGE, EXIT_TABLES_FAILING = 2, 3
_PROVIDER_EXIT_CODE = re.compile(r"Error code is: (-?\d+)")

#: The job's install: its `tiering` command and spark-submit application. As shipped, the
#: command on PATH and the entry inside the package beside this file; `tiering airflow-dag`
#: writes this line with the install's own paths.
INSTALL = {"cli": "tiering", "application": str(Path(__file__).resolve().parents[1] / "jobs" / "tiering_job.py")}

default_args = {
    "owner": "data-platform",
    "retries": 4,
    "retry_delay": timedelta(seconds=30),
    "retry_exponential_backoff": BACKOFF,  # 30 s, 60 s, 120 s, 240 s
    "max_retry_delay": timedelta(minutes=10),
    "execution_timeout": timedelta(hours=2),
}


def _fail_fast(task_id: str, code: int, what: str) -> AirflowFailException:
    return AirflowFailException(f"{task_id}: exit {code} ({what}): not retried")


class TieringCommandOperator(BaseOperator):
    """Runs ``tiering ARGV``; exit codes in ``fail_fast`` fail the task without its retries."""

    template_fields: Sequence[str] = ("argv",)

    def __init__(
        self, *, argv: Sequence[str], tiering: str = "tiering", fail_fast: dict[int, str] | None = None, **kwargs
    ) -> None:
        super().__init__(**kwargs)
        self.argv = list(argv)
        self.tiering = tiering
        self.fail_fast = {EXIT_USAGE: "bad configuration or usage"} if fail_fast is None else fail_fast

    def execute(self, context) -> None:
        done = subprocess.run([self.tiering, *self.argv], capture_output=True, text=True, check=False)
        for line in (done.stdout + done.stderr).splitlines():
            self.log.info("%s", line)
        if done.returncode in self.fail_fast:
            raise _fail_fast(self.task_id, done.returncode, self.fail_fast[done.returncode])
        if done.returncode != 0:
            raise AirflowException(f"{self.task_id}: tiering {self.argv[0]} exited {done.returncode}")


class TieringSubmitOperator(SparkSubmitOperator):
    """SparkSubmitOperator whose job exit 2 (a bad config or Spark version) fails without retries."""

    def execute(self, context) -> None:
        try:
            super().execute(context)
        except AirflowFailException:
            raise
        except AirflowException as e:
            found = _PROVIDER_EXIT_CODE.search(str(e))
            if found and int(found.group(1)) == EXIT_USAGE:
                raise _fail_fast(self.task_id, EXIT_USAGE, "bad configuration or Spark version") from e
            raise


def job_name(conf: Path) -> str | None:
    """``[job] name`` of a config file, or None when the file cannot say it (`tiering check` will)."""
    try:
        name = tomllib.loads(conf.read_text(encoding="utf-8"))["job"]["name"]
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, KeyError, TypeError):
        return None
    return name if isinstance(name, str) and re.fullmatch(r"[A-Za-z0-9._-]+", name) else None


def make_dags(
    conf_dir: Path | str,
    *,
    tiering: str = INSTALL["cli"],
    application: str = INSTALL["application"],
    py_files: str | None = None,
    python: str | None = None,
    schedule: str = "*/15 * * * *",
    spark_conn: str = "spark_default",
    fail_after: int = 3,
) -> dict[str, DAG]:
    """One DAG per ``*.toml`` in ``conf_dir`` (sorted), by DAG id."""
    spark_conf = {"spark.ui.showConsoleProgress": "false"}
    if python:
        spark_conf.update({"spark.pyspark.python": python, "spark.pyspark.driver.python": python})
    dags: dict[str, DAG] = {}
    sources: dict[str, Path] = {}
    for conf in sorted(Path(conf_dir).glob("*.toml")):
        name = job_name(conf)
        dag_id = f"kv_tiering_{name}" if name else "kv_tiering_" + re.sub(r"[^A-Za-z0-9._-]", "_", conf.stem)
        if dag_id in sources:
            raise ValueError(f"{conf} and {sources[dag_id]} both make DAG {dag_id!r}: one config file per job")
        sources[dag_id] = conf
        with DAG(
            dag_id=dag_id,
            description=f"Tier KV store tables into Delta Lake: job {name or '?'} ({conf}), availableNow runs",
            schedule=schedule,
            start_date=datetime(2024, 1, 1),
            catchup=False,
            max_active_runs=1,
            default_args=default_args,
            tags=["kv-tiering"],
        ) as dag:
            check = TieringCommandOperator(task_id="check", tiering=tiering, argv=["check", "--conf", str(conf)])
            tier = TieringSubmitOperator(
                task_id="tier_available_now",
                conn_id=spark_conn,
                application=application,
                application_args=["--conf", str(conf), "--available-now"],
                py_files=py_files,
                conf=spark_conf,
                name=f"kv-tiering-{name or conf.stem}",
            )
            freshness = TieringCommandOperator(
                task_id="freshness",
                tiering=tiering,
                argv=["status", "--conf", str(conf), "--fail-after", str(fail_after)],
                fail_fast={
                    EXIT_USAGE: "bad configuration or usage",
                    EXIT_TABLES_FAILING: f"tables failed {fail_after} or more rounds in a row",
                },
            )
            check >> tier >> freshness
        dags[dag_id] = dag
    return dags


_env = os.environ.get
globals().update(
    make_dags(
        _env("KV_TIERING_CONF_DIR", "/etc/kv-tiering"),
        tiering=_env("KV_TIERING_CLI", INSTALL["cli"]),
        application=_env("KV_TIERING_JOB_SCRIPT", INSTALL["application"]),
        py_files=_env("KV_TIERING_PY_FILES") or None,
        python=_env("KV_TIERING_PYTHON") or None,
        schedule=_env("KV_TIERING_SCHEDULE", "*/15 * * * *"),
        spark_conn=_env("KV_TIERING_SPARK_CONN", "spark_default"),
        fail_after=int(_env("KV_TIERING_FAIL_AFTER", "3")),
    )
)
