"""The store's retry policy: retried until the deadline, and one warning per retried call."""

from __future__ import annotations

import logging

import pytest

from tiering.errors import StoreUnavailableError
from tiering.kvstore import retry


def test_a_call_retried_many_times_logs_one_warning(caplog):
    """A store that is down while a job waits for it: one line per retry window, not per attempt."""
    attempts = []

    def unreachable() -> None:
        attempts.append(1)
        raise StoreUnavailableError("KV store at http://127.0.0.1:1 unreachable: refused (GET /v1/tables)")

    with caplog.at_level(logging.DEBUG, logger=retry.log.name), pytest.raises(StoreUnavailableError):
        retry.instant(retry.STORE_RETRY, attempts=5)(unreachable)

    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(attempts) == 5
    assert warnings == [
        "KV store call retried until it answers or its retry deadline passes: KV store at http://127.0.0.1:1 "
        "unreachable: refused (GET /v1/tables)"
    ]
