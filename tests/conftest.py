"""Test harness: real services as fixtures (docs/DESIGN.md §9). Unit tests need none of them."""

import os
import sys

import pytest
from hypothesis import settings

from tests.support.disk import disk_shortfall
from tests.support.jvm import DRIVER_OPTIONS, SUBMIT_OPTS_VARIABLE

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault(SUBMIT_OPTS_VARIABLE, DRIVER_OPTIONS)  # every Spark driver a test starts

# Speed is measured in benchmarks, not asserted in tests: hypothesis's per-example deadline
# (200 ms) fails a property test on a loaded CI machine whatever the property says.
settings.register_profile("kv-tiering", deadline=None)
settings.load_profile("kv-tiering")

pytest_plugins = [
    "tests.fixtures.fluss",
    "tests.fixtures.s3",
    "tests.fixtures.spark",
    "tests.fixtures.spark_cluster",
    "tests.fixtures.store",
    "tests.fixtures.zk",
]


@pytest.hookimpl(optionalhook=True)  # a venv without pytest-xdist (the Airflow lanes') has no such hook
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadfile`` with the modules that share a costly session fixture handed to one worker
    (tests/support/worker_units.py); any other ``--dist`` as pytest-xdist does it."""
    if config.getvalue("dist") != "loadfile":
        return None
    from tests.support.worker_units import SharedFixtureScheduling

    return SharedFixtureScheduling(config, log)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Stops a session on a nearly full disk before its first test, in one line (tests/support/disk.py)."""
    shortfall = disk_shortfall()
    if shortfall:
        pytest.exit(shortfall, returncode=1)
