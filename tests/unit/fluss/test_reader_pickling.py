"""A Fluss bucket reader as a Spark task gets it: pickled. Unpickled in a process, it is that
process's one reader of its database, so a Python worker's tasks share one gateway JVM and one
pyfluss connection; a reader of another database, server or option set is another reader."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

pytest.importorskip("fluss")

from tiering.fluss.store import FlussBucketReader  # noqa: E402  (pyfluss present)


def shipped(reader: FlussBucketReader) -> FlussBucketReader:
    return pickle.loads(pickle.dumps(reader))


def test_every_task_of_a_process_unpickles_the_same_reader_with_what_it_was_made_with():
    reader = FlussBucketReader("127.0.0.1:9123", "shop", Path("/jars/fluss-client.jar"), {"a.b": "1"})

    first, second = shipped(reader), shipped(reader)

    assert first is second and first is not reader
    assert (first.bootstrap_servers, first.database, first.client_jar, first.options) == (
        "127.0.0.1:9123",
        "shop",
        Path("/jars/fluss-client.jar"),
        {"a.b": "1"},
    )


@pytest.mark.parametrize(
    "other",
    [
        ("127.0.0.1:9124", "shop", None, {}),
        ("127.0.0.1:9123", "lake", None, {}),
        ("127.0.0.1:9123", "shop", None, {"a.b": "2"}),
    ],
)
def test_a_reader_of_another_server_database_or_options_is_another_reader(other):
    ours = shipped(FlussBucketReader("127.0.0.1:9123", "shop", None, {}))

    assert shipped(FlussBucketReader(*other)) is not ours
