"""The lake every round writer test runs on: a local directory and a real S3 server.

delta-spark is refused on an S3 lake (``refuse_s3_lake``: its S3 commits are not mutually
exclusive with another driver's), so a writer test's delta-spark case on S3 is not collected
(deselected, not skipped): test_writers.py tests the refusal instead.
"""

from __future__ import annotations

import pytest

from tiering.delta_log.lake import Lake


@pytest.fixture(params=["local", "s3"])
def lake(request, tmp_path) -> Lake:
    if request.param == "local":
        return Lake.at(str(tmp_path / "lake"))
    server = request.getfixturevalue("s3_server")
    return Lake.at(request.getfixturevalue("s3_root"), server.storage_options())


def pytest_collection_modifyitems(config, items) -> None:
    refused = [item for item in items if _delta_spark_on_s3(item)]
    if refused:
        config.hook.pytest_deselected(items=refused)
        items[:] = [item for item in items if not _delta_spark_on_s3(item)]


def _delta_spark_on_s3(item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    return params.get("kind") == "delta-spark" and params.get("lake") == "s3"
