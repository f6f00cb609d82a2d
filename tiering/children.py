"""Child processes that must not outlive the process that started them, and how they are ended.

Failure mode: a crashed test run or demo leaving servers (ZooKeeper, an embedded S3, a Fluss
cluster) behind, holding ports and memory. On Linux the child asks the kernel for SIGKILL when its
parent dies. A server that ignores SIGTERM, or was left SIGSTOPped, is still ended by
:func:`terminate`.
"""

from __future__ import annotations

import ctypes
import logging
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["die_with_parent", "log_tail", "terminate"]

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


def _set_pdeathsig() -> None:
    # Runs in the child between fork and exec.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def die_with_parent() -> Callable[[], None] | None:
    """The ``preexec_fn`` for ``subprocess.Popen`` (None where the kernel cannot do it)."""
    return _set_pdeathsig if sys.platform == "linux" else None


def terminate(proc: subprocess.Popen, name: str, timeout_s: float) -> None:
    """SIGTERM ``proc`` and wait for it, SIGKILL after ``timeout_s``; a SIGSTOPped one is resumed
    first (it would not act on SIGTERM). ``name`` says what ignored SIGTERM in the warning."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGCONT)
    proc.terminate()
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        log.warning("%s pid %d ignored SIGTERM for %.0fs; killing", name, proc.pid, timeout_s)
        proc.kill()
        proc.wait()


def log_tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` of a child's log, for an error that says why it did not start."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as e:
        return f"(log unreadable: {e})"
