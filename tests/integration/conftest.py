"""Fixtures of the integration tests that run a whole job."""

from __future__ import annotations

import pytest

from tests.support.writers import LAKE_WRITERS, skip_without_delta_jars


@pytest.fixture(params=LAKE_WRITERS)
def lake_writer(request) -> str:
    """The ``lake.writer`` a job test runs with: delta-rs, and delta-spark where the Delta jars are
    on Spark's classpath (scripts/test_delta.sh runs those cases; elsewhere they skip)."""
    if request.param == "delta-spark":
        skip_without_delta_jars(request.getfixturevalue("spark"))
    return request.param
