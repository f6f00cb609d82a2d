"""The executors' warm-up imports what a round's executor tasks import, and runs what the caller
hands in; a Fluss reader's warm-up, pickled as Spark ships it, is the process's reader's."""

from __future__ import annotations

import pickle

import pytest

from tiering.warmup import EXECUTOR_MODULES, import_modules
from tiering.writers import executor_writes

pytestmark = pytest.mark.unit


def test_the_warm_up_imports_the_module_of_the_function_a_rounds_tasks_run():
    assert executor_writes.run_tasks.__module__ in EXECUTOR_MODULES


def test_a_warm_up_task_runs_what_it_is_handed_once_and_yields_its_partition():
    ran = []

    assert list(import_modules([3, 4], lambda: ran.append("prepared"))) == [3, 4]
    assert ran == ["prepared"]


def test_a_fluss_readers_warm_up_unpickled_warms_the_reader_the_rounds_tasks_unpickle():
    pytest.importorskip("fluss")
    from tiering.fluss.store import FlussBucketReader

    reader = FlussBucketReader("127.0.0.1:9123", "warm_shop", None, {"a.b": "1"})

    warm = pickle.loads(pickle.dumps(reader.warm))

    assert warm.__self__ is pickle.loads(pickle.dumps(reader)) and warm.__self__ is not reader
    assert warm.__func__ is FlussBucketReader.warm
