"""The Python process Spark starts for the kv-tiering source's planning: its log lines and its exit.

Failure modes it handles: Spark starts the process with no logging set up, so its INFO lines (the
buckets a round skips, the tables that wait for their freshness targets) would be dropped and its
warnings printed bare (:func:`log_to_stderr` gives them the driver's format); and Spark stops it by
closing its socket, after which it would print the resulting stack trace on the driver's stderr in
a clean stop (:func:`quiet_on_disconnect`, installed by the source's ``stop()``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from types import TracebackType

__all__ = ["LOG_FORMAT", "log_to_stderr", "quiet_on_disconnect"]

#: The driver's log line format (``tiering`` commands), for the planning process's lines.
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def quiet_on_disconnect(print_error: Callable[..., None]) -> Callable[..., None]:
    """``sys.excepthook`` that prints nothing for an error caused, at any depth of its context,
    by the JVM closing the connection (EOF, a broken pipe or a reset), and hands the rest to
    ``print_error``."""

    def hook(kind: type[BaseException], error: BaseException, trace: TracebackType | None) -> None:
        cause: BaseException | None = error
        while cause is not None:
            if isinstance(cause, (EOFError, BrokenPipeError, ConnectionResetError)):
                return
            cause = cause.__context__
        print_error(kind, error, trace)

    return hook


def log_to_stderr(level: int | None) -> None:
    """Give this package's log lines the driver's format on stderr from ``level`` on (None: leave
    logging as it is), unless logging is set up already.

    The planning process is a Python process Spark starts: its stderr reaches the driver's output,
    but nothing sets its logging up, so its INFO lines (the buckets a round skips, the tables that
    wait for their freshness targets) were dropped and its warnings printed bare. The driver says
    at which level it logs to stderr, if it does (``TermContext.log_level``). Only the package's
    logger gets the handler: the libraries' INFO lines (one per store request) stay out."""
    ours = logging.getLogger("tiering")
    if (
        level is None
        or logging.getLogger().handlers
        or any(not isinstance(h, logging.NullHandler) for h in ours.handlers)
    ):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    ours.addHandler(handler)
    ours.setLevel(level)
