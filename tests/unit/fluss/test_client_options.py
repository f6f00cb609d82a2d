"""``[kvstore.client]`` as the two Fluss clients get it: the Java client takes every option, pyfluss
only the ones it knows (it refuses any other, so one Java-only option would break every call)."""

from __future__ import annotations

import pytest

fluss = pytest.importorskip("fluss")

from tiering.fluss.store import _python_options as python_options  # noqa: E402  (pyfluss present)


def test_pyfluss_gets_the_options_it_knows_and_takes_them():
    options = {"writer.acks": "all", "scanner.log.max-poll-records": "100", "client.request-timeout": "60s"}

    known = python_options(options)

    assert known == {"writer.acks": "all", "scanner.log.max-poll-records": "100"}
    assert fluss.Config({**known, "bootstrap.servers": "127.0.0.1:9123"}).writer_acks == "all"
