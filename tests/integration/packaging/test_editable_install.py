"""`scripts/setup.sh`'s install of the checkout (`pip install -e`), into a fresh virtualenv: quiet,
and the package it imports is the checkout's.

The install is pip's, with its build isolation (setuptools from pip's cache) and without the
dependencies, which the checkout's layout does not touch; it runs from a temporary directory with
``PYTHONSAFEPATH`` and no ``PYTHONPATH``, so only the install can find ``tiering``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]


def test_the_editable_install_says_nothing_and_imports_the_checkout(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_")) and k != "VIRTUAL_ENV"}
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "--disable-pip-version-check"]

    installed = subprocess.run(
        [*pip, "install", "-q", "--no-deps", "-e", str(REPO)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert installed.returncode == 0, installed.stderr[-3000:]
    assert installed.stdout + installed.stderr == "", "setup.sh would print:\n" + installed.stderr[-3000:]
    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import tiering; print(tiering.__file__)"],
        cwd=tmp_path,
        env={**env, "PYTHONSAFEPATH": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.stdout.strip() == str(REPO / "tiering" / "__init__.py"), probe.stderr[-2000:]
