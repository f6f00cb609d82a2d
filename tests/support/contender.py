"""A real leader process for the failover tests: ``python -m tests.support.contender``.

It contends for ``JOB``, and while it leads writes ``<pid>:<epoch>:<n>`` to the job's ``data``
znode through its term's fenced write every 100 ms. It reports facts as JSON lines on stdout:
``waiting``, ``leader`` (epoch), ``write_failed`` (error type), ``on_lost`` (the callback ran),
``lost`` (reason), ``write_after_lost``, and exits 0 once its term is lost.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from tiering.coord import acquire_leadership
from tiering.errors import TieringError

_print_lock = threading.Lock()


def emit(event: str, **fields) -> None:
    with _print_lock:
        print(json.dumps({"event": event, "pid": os.getpid(), **fields}), flush=True)


def data_path(job: str) -> str:
    return f"/tiering/jobs/{job}/data"


def main(hosts: str, job: str, session_timeout_s: float) -> int:
    emit("waiting")
    term = acquire_leadership(
        hosts, job, session_timeout_s, owner={"role": "contender"}, on_lost=lambda: emit("on_lost")
    )
    emit("leader", epoch=term.epoch)
    n = 0
    while not term.lost.is_set():
        n += 1
        try:
            term.fenced_set(data_path(job), f"{os.getpid()}:{term.epoch}:{n}".encode())
        except TieringError as e:
            emit("write_failed", error=type(e).__name__, message=str(e))
        time.sleep(0.1)
    emit("lost", reason=term.lost_reason)
    try:
        term.fenced_set(data_path(job), f"{os.getpid()}:{term.epoch}:after-lost".encode())
        emit("write_after_lost", error=None)
    except TieringError as e:
        emit("write_after_lost", error=type(e).__name__)
    term.resign()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))
