"""Named crash points for failure tests: ``KV_TIERING_FAILPOINTS=name[,name]`` SIGKILLs the process there.

Failure tests must kill a real driver at an exact point of a round (after the lease is
acquired, before or after the Delta commit), not "somewhere": timing-based kills test nothing
reliably. Nor may a test pass because its point was never reached, so a point that fires says
so first, one line on stderr (:func:`fired`), which the test looks for in the driver's output.
``name=sleep:SECONDS`` holds the process there instead (fail-rs's ``sleep``): a test that
kills another process at that point (an executor's JVM while its Python worker reads a
bucket) finds the line, kills, and the sleeping process never goes on. ``name=hold:PATH`` holds
it while the file ``PATH`` exists: a test that needs the process held exactly as long as its
checks take removes the file when done, and later rounds pass the point at once. Like TiKV's fail-rs,
production code names the points; with the variable unset a point costs one dict lookup.
"""

from __future__ import annotations

import os
import signal
import time

ENV = "KV_TIERING_FAILPOINTS"  # outside TIERING_*: that prefix is config (tiering.conf.loader)
_SLEEP = "sleep:"
_HOLD = "hold:"
#: how often a held process looks whether its file is gone
_HOLD_POLL_S = 0.05


def fired(name: str) -> str:
    """The line a process writes to stderr when failpoint ``name`` kills it."""
    return f"failpoint {name} fired: SIGKILL"


def sleeping(name: str) -> str:
    """The line a process writes to stderr when failpoint ``name`` holds it (``name=sleep:S`` or
    ``name=hold:PATH``)."""
    return f"failpoint {name} fired: sleep"


def hit(name: str) -> None:
    """SIGKILL this process when ``name`` is armed in the environment (hold it when armed as
    ``name=sleep:S``, or while file PATH exists when armed as ``name=hold:PATH``), saying so on
    stderr first."""
    armed = os.environ.get(ENV)
    if not armed:
        return
    for point in armed.split(","):
        point_name, _, action = point.partition("=")
        if point_name != name:
            continue
        if action.startswith(_SLEEP):
            _say(f"{sleeping(name)} {action[len(_SLEEP) :]} s")
            time.sleep(float(action[len(_SLEEP) :]))
            return
        if action.startswith(_HOLD):
            path = action[len(_HOLD) :]
            if os.path.exists(path):
                _say(f"{sleeping(name)} while {path} exists")
            while os.path.exists(path):
                time.sleep(_HOLD_POLL_S)
            return
        _say(fired(name))
        os.kill(os.getpid(), signal.SIGKILL)


def _say(line: str) -> None:
    try:  # unbuffered: the line is in the pipe or file before the kill
        os.write(2, f"{line} (pid {os.getpid()})\n".encode())
    except OSError:  # no stderr: the point still acts, the test sees no line and fails
        pass
