"""The venv's archive of Spark's classes (tests/support/class_archive.py) is mapped by the drivers
the tests start: a JVM maps a stale or mismatched archive silently (its CDS log is off) and the
suite then passes on more CPU, so this test asks the JVM to refuse to start without it
(``-Xshare:on``) and checks that Spark's own classes come from it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pyspark
import pytest

from tests.support.class_archive import archive_path
from tests.support.jvm import DRIVER_OPTIONS, SUBMIT_OPTS_VARIABLE

#: delta_jars: the Delta lane (scripts/test_delta.sh) checks its venv's archive too, as the oldest
#: lane (scripts/test_oldest.sh) does; without the jars the test needs none and runs as it is.
pytestmark = [pytest.mark.integration, pytest.mark.delta_jars]

SPARK_SUBMIT = Path(pyspark.__file__).parent / "bin" / "spark-submit"


def test_a_driver_started_with_the_tests_options_maps_the_venv_s_class_archive():
    assert archive_path().is_file(), f"no class archive at {archive_path()}: scripts/setup_tests.sh main makes it"
    # spark-submit's own JVM, on the classpath and options of every client-mode driver the tests
    # start; --version loads SparkSubmit and exits, without a SparkContext.
    env = {**os.environ, SUBMIT_OPTS_VARIABLE: f"{DRIVER_OPTIONS} -Xshare:on -Xlog:class+load=info"}
    run = subprocess.run([str(SPARK_SUBMIT), "--version"], env=env, capture_output=True, text=True, timeout=120)
    output = run.stdout + run.stderr
    assert run.returncode == 0, f"the driver's JVM did not start with the archive mapped:\n{output[-3000:]}"
    assert "org.apache.spark.deploy.SparkSubmit source: shared objects file (top)" in output, output[-3000:]
