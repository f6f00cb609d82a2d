"""The request and the store's answer, read from pyarrow's S3 errors for an ObjectWriteError."""

from __future__ import annotations

import pytest

from tiering.objectstore.landed import store_answer

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "When uploading part for key 'x/f' in bucket 'lake': AWS Error ACCESS_DENIED during UploadPart operation: "
            "Access Denied. (Request ID: 18EADF5A9317D8196FCBBC1E)",
            ("UploadPart", "ACCESS_DENIED (Access Denied.)"),
        ),
        (
            "When uploading object with key 'a/f' in bucket 'lake': AWS Error SLOW_DOWN during PutObject operation: "
            "Please reduce your request rate.",
            ("PutObject", "SLOW_DOWN (Please reduce your request rate.)"),
        ),
        (
            "When uploading object with key 'a/f' in bucket 'lake': AWS Error NETWORK_CONNECTION during PutObject "
            "operation: curlCode: 28, Timeout was reached",
            ("PutObject", "TIMEOUT (curlCode: 28, Timeout was reached)"),
        ),
        (
            "When getting information for key 'k' in bucket 'lake': AWS Error UNKNOWN (HTTP status 503) during "
            "HeadObject operation: No response body.",
            ("HeadObject", "HTTP 503 (No response body.)"),
        ),
        ("disk full", ("close (upload)", "OSError: disk full")),
    ],
)
def test_the_answer_names_the_request_and_what_the_store_said(message, expected):
    assert store_answer(OSError(message), "close (upload)") == expected
