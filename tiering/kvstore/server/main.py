"""Running the reference store: the HTTP server plus its periodic snapshot and GC loops.

Failure mode: a background loop that dies on its first exception silently stops GC (disks
fill) or snapshots (bootstraps replay ever longer logs). Each loop logs and carries on; all
stop when the server stops (SIGTERM / Ctrl-C via uvicorn).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path

from tiering.errors import ConfigError

#: Default of ``serve(max_body_bytes=...)``: a 10^6-row Arrow write (~16 MB) fits, as does a
#: JSON write of a few hundred thousand rows; larger writes are split by the client.
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024

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
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> None:
    """Serve until stopped. ``snapshot_interval_s`` 0 = snapshots only on request;
    ``log_retention_s`` None = log segments are kept until tiered (no hard cap);
    ``max_body_bytes``: larger request bodies are refused with 413."""
    from tiering.extras import require

    require("store", "the reference KV store")
    import uvicorn

    from tiering.kvstore.server.app import create_app
    from tiering.kvstore.server.store import Store

    problems = []
    if max_body_bytes < 1:
        problems.append(f"--max-body-bytes: must be >= 1, got {max_body_bytes}")
    if num_retained < 1:
        problems.append(f"--num-retained: must be >= 1, got {num_retained}")
    if gc_interval_s <= 0:
        problems.append(f"--gc-interval: must be > 0 seconds, got {gc_interval_s}")
    if snapshot_interval_s < 0:
        problems.append(f"--snapshot-interval: must be >= 0 seconds, got {snapshot_interval_s}")
    if problems:
        raise ConfigError(problems)

    store = Store(Path(data_dir), num_retained=num_retained, log_retention_s=log_retention_s)
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(store, token, max_body_bytes),
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="off",
        )
    )
    stop = threading.Event()
    loops = [_loop("gc", gc_interval_s, store.gc, stop)]
    if snapshot_interval_s > 0:
        loops.append(_loop("snapshots", snapshot_interval_s, store.snapshot_changed_tables, stop))

    def announce() -> None:
        while not server.started and not stop.wait(0.05):
            pass
        if not server.started:  # it never bound (a port taken): uvicorn said why
            return
        for s in server.servers:
            for sock in s.sockets:
                bound_host, bound_port = sock.getsockname()[:2]
                log.info(
                    "kv-store serving at http://%s:%d (data dir %s, auth %s)",
                    bound_host,
                    bound_port,
                    data_dir,
                    "on" if token else "off",
                )

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


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of :func:`serve`, for ``python -m tiering.kvstore.server`` (and the ``tiering``
    command's ``kv-store serve``, which can take them from here)."""
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--port", type=int, default=8420)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--snapshot-interval",
        type=float,
        default=0.0,
        help="seconds between periodic snapshots of every table (0 = only on demand)",
    )
    parser.add_argument(
        "--num-retained", type=int, default=2, help="newest snapshots kept per bucket (kv.snapshot.num-retained)"
    )
    parser.add_argument("--gc-interval", type=float, default=30.0, help="seconds between GC passes")
    parser.add_argument(
        "--log-retention",
        type=float,
        default=None,
        help="hard cap in seconds: delete snapshot-covered log segments older than this even "
        "if not tiered yet (default: off; tiering then re-bootstraps, or fails with "
        "fail-on-data-loss)",
    )
    parser.add_argument(
        "--token",
        default=os.environ.get("TIERING_KVSTORE_TOKEN", ""),
        help="require this bearer token (default: $TIERING_KVSTORE_TOKEN, none)",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=DEFAULT_MAX_BODY_BYTES,
        help=f"refuse larger request bodies with 413 (default {DEFAULT_MAX_BODY_BYTES})",
    )


def serve_from_args(args: argparse.Namespace) -> None:
    """:func:`serve` with the flags of :func:`add_serve_arguments`."""
    serve(
        data_dir=Path(args.data_dir),
        port=args.port,
        host=args.host,
        snapshot_interval_s=args.snapshot_interval,
        num_retained=args.num_retained,
        gc_interval_s=args.gc_interval,
        token=args.token or None,
        log_retention_s=args.log_retention,
        max_body_bytes=args.max_body_bytes,
    )
