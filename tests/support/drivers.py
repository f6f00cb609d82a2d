"""Real ``tiering`` processes: a `tiering run` driver a test kills, freezes or stops, and the
CLI run to completion.

A driver runs in its own process group: a kill takes the Python driver and its JVM (and the
JVM's Python workers) together, like a lost container; freezing the group pauses the whole
"machine"; and nothing lingers into the next trial. Its output goes to a log file, never a pipe
that can fill. A driver armed with a failpoint (:mod:`tiering.failpoints`) says on its output
when the point killed it: :meth:`Driver.fired`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from tiering import failpoints

REPO = Path(__file__).resolve().parents[2]


def driver_env(failpoint: str | None = None) -> dict[str, str]:
    """The test's environment without its ``TIERING_*`` config and failpoints, plus ``failpoint``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERING_") and k != failpoints.ENV}
    env["PYSPARK_PYTHON"] = sys.executable
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    if failpoint:
        env[failpoints.ENV] = failpoint
    return env


class Driver:
    """One ``tiering run --conf`` process group, its output in ``log`` (by default a new file
    beside ``conf``); ``available_now`` adds ``--available-now``."""

    def __init__(
        self, conf: Path, log: Path | None = None, *, available_now: bool = False, failpoint: str | None = None
    ) -> None:
        if log is None:
            fd, name = tempfile.mkstemp(prefix="driver-", suffix=".log", dir=conf.parent)
            os.close(fd)
            log = Path(name)
        self.log = log
        argv = [sys.executable, "-m", "tiering.cli", "run", "--conf", str(conf)]
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                argv + (["--available-now"] if available_now else []),
                cwd=REPO,
                env=driver_env(failpoint),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.pid = self.proc.pid

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the driver process only (its JVM notices a dead parent by itself)."""
        os.kill(self.pid, sig)

    def freeze(self) -> None:
        """SIGSTOP the whole process group: a paused machine, JVM and Python workers included."""
        os.killpg(self.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.killpg(self.pid, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL the driver and everything it started (JVM, Python workers)."""
        self.reap()

    def wait(self, timeout_s: float = 300) -> int:
        """The driver's exit code; its group is reaped once it exited, killed when it did not."""
        try:
            rc = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            tail = self.tail()
            self.reap()
            raise AssertionError(f"driver {self.pid} still running after {timeout_s}s:\n{tail}") from None
        self.reap()
        return rc

    def reap(self) -> None:
        """Whatever is left of the group (a frozen or orphaned JVM, the driver itself) is killed."""
        try:
            os.killpg(self.pid, signal.SIGCONT)
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.output().splitlines()[-lines:])

    def saw(self, text: str) -> bool:
        return text in self.output()

    def fired(self, failpoint: str) -> bool:
        """Whether ``failpoint`` killed the driver (it says so on its way out)."""
        return self.saw(failpoints.fired(failpoint))


def run_driver(conf: Path, failpoint: str | None = None, timeout_s: float = 300) -> tuple[int, str]:
    """One `tiering run --available-now`: its exit code and its output (which names
    ``failpoint`` when the point killed it: :func:`tiering.failpoints.fired`)."""
    driver = Driver(conf, available_now=True, failpoint=failpoint)
    rc = driver.wait(timeout_s)
    return rc, driver.output()


def tiering_cli(*argv: str) -> subprocess.CompletedProcess:
    """The ``tiering`` command as an operator runs it (no ``TIERING_*`` from the test's environment)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERING_")}
    return subprocess.run(
        [sys.executable, "-m", "tiering.cli", *argv], env=env, capture_output=True, text=True, timeout=120
    )


def build_pyfiles_zip(dest: Path) -> Path:
    """The package as spark-submit ships it (``--py-files``), built the documented way."""
    built = subprocess.run(
        [str(REPO / "scripts" / "build_pyfiles.sh"), str(dest)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable},
    )
    assert built.returncode == 0, built.stderr
    return dest
