"""The lake every round writer test runs on: a local directory and a real S3 server."""

from __future__ import annotations

import pytest

from tiering.delta_log.lake import Lake


@pytest.fixture(params=["local", "s3"])
def lake(request, tmp_path) -> Lake:
    if request.param == "local":
        return Lake.at(str(tmp_path / "lake"))
    server = request.getfixturevalue("s3_server")
    return Lake.at(request.getfixturevalue("s3_root"), server.storage_options())
