"""Running the reference store: the HTTP server plus its periodic snapshot and GC loops.

Failure mode: a background loop that dies on its first exception silently stops GC (disks
fill) or snapshots (bootstraps replay ever longer logs). Each loop logs and carries on; all
stop when the server stops (SIGTERM / Ctrl-C via uvicorn).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from pathlib import Path

from tiering.errors import ConfigError

log = logging.getLogger(__name__)


def _loop(name: str, interval_s: float, work: Callable[[], object], stop: threading.Event) -> threading.Thread:
    def run() -> None:
        while not stop.wait(interval_s):
            try:
                work()
            except Exception:
                log.exception("%s pass failed; retrying in %.1fs", name, interval_s)

    thread = threading.Thread(target=run, name=f"kvstore-{name}", daemon=True)
    thread.start()
    return thread


def serve(
    data_dir: Path,
    port: int,
    host: str = "127.0.0.1",
    snapshot_interval_s: float = 0.0,
    num_retained: int = 2,
    gc_interval_s: float = 30.0,
    token: str | None = None,
    log_retention_s: float | None = None,
) -> None:
    """Serve until stopped. ``snapshot_interval_s`` 0 = snapshots only on request;
    ``log_retention_s`` None = log segments are kept until tiered (no hard cap)."""
    import uvicorn

    from tiering.kvstore.server.app import create_app
    from tiering.kvstore.server.store import Store

    problems = []
    if num_retained < 1:
        problems.append(f"--num-retained: must be >= 1, got {num_retained}")
    if gc_interval_s <= 0:
        problems.append(f"--gc-interval: must be > 0 seconds, got {gc_interval_s}")
    if snapshot_interval_s < 0:
        problems.append(f"--snapshot-interval: must be >= 0 seconds, got {snapshot_interval_s}")
    if problems:
        raise ConfigError(problems)

    store = Store(Path(data_dir), num_retained=num_retained, log_retention_s=log_retention_s)
    server = uvicorn.Server(uvicorn.Config(
        create_app(store, token), host=host, port=port, log_level="warning", access_log=False, lifespan="off",
    ))
    stop = threading.Event()
    loops = [_loop("gc", gc_interval_s, store.gc, stop)]
    if snapshot_interval_s > 0:
        loops.append(_loop("snapshots", snapshot_interval_s, store.snapshot_changed_tables, stop))

    def announce() -> None:
        while not server.started and not stop.wait(0.05):
            pass
        for s in server.servers:
            for sock in s.sockets:
                bound_host, bound_port = sock.getsockname()[:2]
                log.info("kv-store serving at http://%s:%d (data dir %s, auth %s)", bound_host, bound_port,
                         data_dir, "on" if token else "off")

    threading.Thread(target=announce, name="kvstore-announce", daemon=True).start()
    # uvicorn handles SIGTERM during run() and re-raises it afterwards; a no-op handler turns
    # that re-raise into a normal return so the loops stop and the database closes cleanly.
    signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        server.run()
    finally:
        stop.set()
        for thread in loops:
            thread.join(timeout=10)
        store.close()
        log.info("kv-store stopped")
