"""The built wheel installed in a fresh virtualenv, away from the checkout: what a user gets from
`pip install dist/kv_tiering-*.whl`, shared by the tests that run it as is (test_wheel) and packed
for the executors (test_packed_env).

The wheel and its virtualenv are made once per session (pyspark comes from pip's cache); every
command runs from a temporary directory with ``PYTHONSAFEPATH``, no ``PYTHONPATH`` and none of
the test process's ``PYSPARK_*``/``SPARK_HOME``, so only the installed copy can be imported.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def _without_the_checkout() -> dict[str, str]:
    """This process's environment without what points a Python at the checkout or at Spark: a
    ``PYTHONPATH`` naming the checkout would also show pip the build's ``kv_tiering.egg-info`` there
    as kv-tiering installed already."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TIERING_", "PYSPARK_", "PYTHON")) and k not in ("SPARK_HOME", "VIRTUAL_ENV")
    }


@dataclass(frozen=True)
class InstalledWheel:
    wheel: Path
    venv: Path
    home: Path  # a directory outside the checkout to run commands in
    seconds_to_install: float

    def env(self) -> dict[str, str]:
        env = _without_the_checkout()
        return {**env, "PYTHONSAFEPATH": "1", "PATH": f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}

    def run(self, *argv: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.venv / "bin" / argv[0]), *argv[1:]],
            cwd=cwd or self.home,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )


@pytest.fixture(scope="session")
def installed_wheel(tmp_path_factory) -> InstalledWheel:
    started = time.monotonic()
    root = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(root / "dist"), str(REPO)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = (root / "dist").glob("kv_tiering-*.whl")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    installed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
        env=_without_the_checkout(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    home = root / "home"
    home.mkdir()
    return InstalledWheel(wheel, venv, home, time.monotonic() - started)
