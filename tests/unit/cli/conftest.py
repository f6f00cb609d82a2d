"""``main()`` sets library loggers' levels for the process: put them back after each test."""

from __future__ import annotations

import logging

import pytest

from tiering.cli import LIBRARY_LOGGERS, RETRY_LOGGERS


@pytest.fixture(autouse=True)
def logger_levels():
    names = {*LIBRARY_LOGGERS, *RETRY_LOGGERS}
    saved = {name: logging.getLogger(name).level for name in names}
    yield
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)
