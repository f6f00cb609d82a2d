"""The executors' warm-up imports what a round's executor tasks import."""

from __future__ import annotations

import pytest

from tiering.lake import executor_writes
from tiering.warmup import EXECUTOR_MODULES

pytestmark = pytest.mark.unit


def test_the_warm_up_imports_the_module_of_the_function_a_rounds_tasks_run():
    assert executor_writes.run_tasks.__module__ in EXECUTOR_MODULES
