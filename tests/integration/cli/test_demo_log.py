"""`tiering demo` with its output in a file, as a CI job or `> demo.log` keeps it: every table
whole (no `orde…`, no `leas…`: rich gave a non-terminal 80 columns) and each on its own lines."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.drivers import REPO
from tiering.cli import EXIT_OK

pytestmark = pytest.mark.integration


def test_the_demo_written_to_a_file_shortens_no_name(tmp_path):
    log = tmp_path / "demo.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERING_") and k != "COLUMNS"}
    with open(log, "w") as out:
        done = subprocess.run(
            [sys.executable, "-m", "tiering.cli", "demo", "--duration", "3", "--tables", "3"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            timeout=600,
        )
    text = log.read_text()
    assert done.returncode == EXIT_OK, text[-3000:]
    assert "…" not in text and "\x1b[" not in text, text
    rows = [line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")]
    assert rows == ["orders", "customers", "inventory"] * 2, text  # the live view's last state, then the check
    assert "leased" in text and "lake vs store, row by row" in text
    caption = next(line for line in text.splitlines() if "log end / lake:" in line)
    assert "lake vs store" not in caption, "the live view's last line ends before the next table"
