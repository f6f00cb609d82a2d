"""A session on a nearly full disk stops before its first test, saying so in one line
(tests/support/disk.py), instead of its S3 tests timing out one by one on the stalled server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.disk import disk_shortfall
from tests.support.mounts import small_tmpfs

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def test_a_session_whose_temporary_directory_is_nearly_full_stops_naming_it(tmp_path):
    with small_tmpfs(tmp_path / "small", 1024) as small:
        shortfall = disk_shortfall(str(small))
        assert shortfall is not None and str(small) in shortfall and "GiB" in shortfall
        session = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "tests/unit/test_spark_version.py"],
            cwd=ROOT,
            env={**os.environ, "TMPDIR": str(small)},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert session.returncode == 1, session.stdout + session.stderr
    assert shortfall in session.stdout + session.stderr
    assert " passed" not in session.stdout
