"""The planning process's log lines: the driver's format on stderr, the package's lines only."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit


def test_the_planning_process_logs_its_info_lines_like_the_driver_and_no_library_chatter():
    """Spark starts the planning process with no logging set up: without this, a round's line
    counting the tables that wait for their freshness targets never reached the driver's output."""
    code = (
        "import logging; from tiering.planning_process import log_to_stderr; log_to_stderr(20); log_to_stderr(20); "
        "logging.getLogger('tiering.source').info('round=1 plans'); logging.getLogger('httpx').info('GET /v1/logs')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].endswith(" INFO tiering.source: round=1 plans"), done.stderr
    quiet = code.replace("log_to_stderr(20)", "log_to_stderr(None)")
    done = subprocess.run([sys.executable, "-c", quiet], capture_output=True, text=True, timeout=60)
    assert done.stderr == "", "a driver that logs elsewhere (the demo's file) keeps the planning process quiet"
