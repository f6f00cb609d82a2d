"""The one way an error's text becomes one line (logs, the health file, status)."""

from __future__ import annotations

import pickle

import pytest

from tiering.errors import (
    ConfigError,
    FencedEpochError,
    ForeignCommitError,
    ObjectWriteError,
    OffsetLogFormatError,
    StoreError,
    one_line,
)

pytestmark = pytest.mark.unit


def test_a_chained_colored_error_is_one_plain_line_with_every_cause():
    chained = "Generic S3 error:\n  \x1b[1;31mrequest failed\x1b[0m\n   ↳ PUT http://s3/x\n   ↳ 503 SlowDown  "

    assert one_line(chained) == "Generic S3 error: request failed -> PUT http://s3/x -> 503 SlowDown"
    assert one_line(StoreError("a\n\nb")) == "a b" and one_line("") == ""


@pytest.mark.parametrize(
    "error",
    [
        ConfigError(["lake.root: expected a path"]),
        ForeignCommitError("another writer", version=7, operation="DELETE", table="orders"),
        ObjectWriteError("s3://lake/x", "PutObject", "SLOW_DOWN", table="orders"),
        OffsetLogFormatError("unknown version", path="/ckpt/offsets/3", version="v9"),
        FencedEpochError("stale", epoch=3, table="orders"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_an_error_crosses_processes_whole(error):
    """Errors travel pickled (a bucket task's result, a planning process's answer): the same
    class, text and attributes on the other side, whatever its constructor takes."""
    copy = pickle.loads(pickle.dumps(error))

    assert type(copy) is type(error) and str(copy) == str(error) and vars(copy) == vars(error)
