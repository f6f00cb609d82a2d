"""`tiering submit`: the spark-submit command line of the job entry in this install, built and run.

Failure mode it guards against: a hand-written spark-submit line that runs another copy of the
entry (a checkout's, another virtualenv's) or starts the driver's Python on an interpreter without
the service's dependencies. The entry is this install's ``tiering/jobs/tiering_job.py``; the
spark-submit is ``--spark-submit``, else ``$SPARK_HOME/bin/spark-submit``, else the one next to
this interpreter (pyspark's), else the one on ``PATH``; the driver and executors' Python is this
interpreter unless ``PYSPARK_PYTHON`` says otherwise (``tiering``'s ``main`` sets it). A driver
started here (client mode) logs Spark's warnings, not its INFO, with the package's log4j2 file,
unless the spark-submit options set the driver's Java options themselves.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["ENTRY", "LOG4J2", "spark_submit_executable", "submit_command"]

#: The file spark-submit runs: ``tiering run``'s arguments follow it.
ENTRY = Path(__file__).resolve().with_name("jobs") / "tiering_job.py"
#: Spark's logging for a driver started by `tiering submit`: warnings and the job's own lines.
LOG4J2 = Path(__file__).resolve().with_name("resources") / "log4j2.properties"


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
    """``spark-submit [logging] [spark_args] ENTRY [job_args]``: ``job_args`` are ``tiering run``'s;
    the logging options are :func:`_quiet_driver`'s."""
    return [spark_submit_executable(spark_submit), *_quiet_driver(spark_args), *spark_args, str(ENTRY), *job_args]


def _quiet_driver(spark_args: Sequence[str]) -> list[str]:
    """The driver's Java options naming :data:`LOG4J2`, unless ``spark_args`` set the driver's Java
    options (theirs would be replaced) or run it in cluster mode (where this path may not exist)."""
    text = " ".join(spark_args)
    own = "--driver-java-options" in spark_args or "spark.driver.extraJavaOptions" in text
    cluster = any(a == "--deploy-mode" and b == "cluster" for a, b in zip(spark_args, spark_args[1:], strict=False))
    if own or cluster or "--deploy-mode=cluster" in spark_args:
        return []
    return ["--driver-java-options", f"-Dlog4j2.configurationFile={LOG4J2}"]
