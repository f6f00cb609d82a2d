"""Fixtures the Fluss modules share: a database of their own, Fluss's Java client writing to it
(tests/support/fluss_rows.py) and the store seam over it (FlussStore, its gateway JVM holding
fluss-client and, when built, our jvm/fluss-snapshot-source jar), each made once per module."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.support.fluss import client_jar
from tests.support.fluss_rows import FlussRows
from tiering.fluss.store import FlussStore


@pytest.fixture(scope="module")
def database() -> str:
    return f"db_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def writer(fluss_cluster, database) -> Iterator[FlussRows]:
    made = FlussRows(fluss_cluster.bootstrap_servers, database)
    yield made
    made.close()


@pytest.fixture(scope="module")
def store(fluss_cluster, database, writer) -> Iterator[FlussStore]:
    made = FlussStore(fluss_cluster.bootstrap_servers, database, client_jar())
    yield made
    made.close()
