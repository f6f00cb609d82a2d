"""The cluster benchmark's time line: a run's phases from the seconds at which each ends."""

from __future__ import annotations

import pytest

from benchmarks.bench_cluster import _phases

pytestmark = pytest.mark.unit


def test_a_phase_whose_end_the_run_did_not_log_leaves_its_time_to_the_next():
    assert _phases({"start": 1.0, "unlogged": None, "work": 3.5, "exit": 4.0}) == {
        "start": 1.0,
        "unlogged": None,
        "work": 2.5,
        "exit": 0.5,
    }
