"""Named crash points for failure tests: ``KV_TIERING_FAILPOINTS=name[,name]`` SIGKILLs the process there.

Failure tests must kill a real driver at an exact point of a round (after the lease is
acquired, before or after the Delta commit), not "somewhere": timing-based kills test nothing
reliably. Nor may a test pass because its point was never reached, so a point that fires says
so first, one line on stderr (:func:`fired`), which the test looks for in the driver's output.
Like TiKV's fail-rs, production code names the points; with the variable unset a point costs
one dict lookup.
"""

from __future__ import annotations

import os
import signal

ENV = "KV_TIERING_FAILPOINTS"  # outside TIERING_*: that prefix is config (tiering.conf.loader)


def fired(name: str) -> str:
    """The line a process writes to stderr when failpoint ``name`` kills it."""
    return f"failpoint {name} fired: SIGKILL"


def hit(name: str) -> None:
    """SIGKILL this process when ``name`` is armed in the environment, saying so on stderr first."""
    armed = os.environ.get(ENV)
    if armed and name in armed.split(","):
        try:  # unbuffered: the line is in the pipe or file before the kill
            os.write(2, f"{fired(name)} (pid {os.getpid()})\n".encode())
        except OSError:  # no stderr: the kill still happens, the test sees no line and fails
            pass
        os.kill(os.getpid(), signal.SIGKILL)
