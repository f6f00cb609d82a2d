"""Child processes that must not outlive the process that started them.

Failure mode: a crashed test run or demo leaving servers (ZooKeeper, an embedded S3) behind,
holding ports and memory. On Linux the child asks the kernel for SIGKILL when its parent dies.
"""

from __future__ import annotations

import ctypes
import signal
import sys
from collections.abc import Callable

__all__ = ["die_with_parent"]

_PR_SET_PDEATHSIG = 1


def _set_pdeathsig() -> None:
    # Runs in the child between fork and exec.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def die_with_parent() -> Callable[[], None] | None:
    """The ``preexec_fn`` for ``subprocess.Popen`` (None where the kernel cannot do it)."""
    return _set_pdeathsig if sys.platform == "linux" else None
