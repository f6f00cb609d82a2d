"""`tiering submit`: the spark-submit command line of the job entry in this install, built and run.

Failure mode it guards against: a hand-written spark-submit line that runs another copy of the
entry (a checkout's, another virtualenv's) or starts the driver's Python on an interpreter without
the service's dependencies. The entry is this install's ``tiering/jobs/tiering_job.py``; the
spark-submit is ``--spark-submit``, else ``$SPARK_HOME/bin/spark-submit``, else the one next to
this interpreter (pyspark's), else the one on ``PATH``; the driver and executors' Python is this
interpreter unless ``PYSPARK_PYTHON`` says otherwise (``tiering``'s ``main`` sets it).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["ENTRY", "spark_submit_executable", "submit_command"]

#: The file spark-submit runs: ``tiering run``'s arguments follow it.
ENTRY = Path(__file__).resolve().with_name("jobs") / "tiering_job.py"


def spark_submit_executable(explicit: str | None = None) -> str:
    if explicit:
        return explicit
    if os.environ.get("SPARK_HOME"):
        return str(Path(os.environ["SPARK_HOME"]) / "bin" / "spark-submit")
    beside = Path(sys.executable).with_name("spark-submit")
    if beside.exists():
        return str(beside)
    return shutil.which("spark-submit") or "spark-submit"


def submit_command(
    job_args: Sequence[str], spark_args: Sequence[str] = (), spark_submit: str | None = None
) -> list[str]:
    """``spark-submit [spark_args] ENTRY [job_args]``: ``job_args`` are ``tiering run``'s."""
    return [spark_submit_executable(spark_submit), *spark_args, str(ENTRY), *job_args]
