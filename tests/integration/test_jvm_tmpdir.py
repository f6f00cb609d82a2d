"""The tests' JVMs keep their temporary files in the directory scripts/test.sh names for the run
(tests/support/jvm.py): what a JVM the tests kill unpacked there goes when the run ends, not into
the machine's /tmp."""

from __future__ import annotations

import os

import pytest

from tests.support.jvm import TMPDIR_VARIABLE

pytestmark = pytest.mark.integration


def test_a_driver_the_tests_start_keeps_its_temporary_files_in_the_run_s_directory(spark):
    wanted = os.environ.get(TMPDIR_VARIABLE)
    if not wanted:
        pytest.skip(f"{TMPDIR_VARIABLE} is unset: scripts/test.sh and scripts/venv_pytest.sh set it")
    assert spark.sparkContext._jvm.java.lang.System.getProperty("java.io.tmpdir") == wanted
