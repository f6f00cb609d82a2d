"""Named crash points for failure tests: ``KV_TIERING_FAILPOINTS=name[,name]`` SIGKILLs the process there.

Failure tests must kill a real driver at an exact point of a round (after the lease is
acquired, before or after the Delta commit), not "somewhere": timing-based kills test nothing
reliably. Like TiKV's fail-rs, production code names the points; with the variable unset a
point costs one dict lookup.
"""

from __future__ import annotations

import os
import signal

ENV = "KV_TIERING_FAILPOINTS"  # outside TIERING_*: that prefix is config (tiering.conf.loader)


def hit(name: str) -> None:
    """SIGKILL this process when ``name`` is armed in the environment."""
    armed = os.environ.get(ENV)
    if armed and name in armed.split(","):
        os.kill(os.getpid(), signal.SIGKILL)
