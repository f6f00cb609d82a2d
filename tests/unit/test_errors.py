"""The one way an error's text becomes one line (logs, the health file, status)."""

from __future__ import annotations

import pytest

from tiering.errors import StoreError, one_line

pytestmark = pytest.mark.unit


def test_a_chained_colored_error_is_one_plain_line_with_every_cause():
    chained = "Generic S3 error:\n  \x1b[1;31mrequest failed\x1b[0m\n   ↳ PUT http://s3/x\n   ↳ 503 SlowDown  "

    assert one_line(chained) == "Generic S3 error: request failed -> PUT http://s3/x -> 503 SlowDown"
    assert one_line(StoreError("a\n\nb")) == "a b" and one_line("") == ""
