"""mimalloc's setting (tiering/allocator.py) is in the environment when a process that tiers first
imports pyarrow: mimalloc reads it then, once, and a setting made later does nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.config import write_conf
from tiering.allocator import ALLOCATOR_ENV, keep_freed_pages
from tiering.job import EXECUTOR_ALLOCATOR_CONF

pytestmark = pytest.mark.unit

#: Runs the statement ``argv[1]`` in a fresh interpreter and prints what the environment held of
#: mimalloc's options (``argv[2:]``) when pyarrow was first imported ("not imported": never).
_SPY = """
import os, sys
names, seen = sys.argv[2:], []
class Spy:
    def find_spec(self, name, path=None, target=None):
        if name == "pyarrow" and not seen:
            seen.append({k: os.environ.get(k) for k in names})
sys.meta_path.insert(0, Spy())
try:
    exec(sys.argv[1])
except SystemExit:
    pass
print(seen[0] if seen else "not imported")
"""


def _at_pyarrow_import(statement: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ALLOCATOR_ENV and not k.startswith("TIERING_")}
    spy = [sys.executable, "-c", _SPY, statement, *ALLOCATOR_ENV]
    done = subprocess.run(spy, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_sets_what_the_environment_leaves_unset_and_keeps_what_it_sets():
    unset: dict[str, str] = {}
    keep_freed_pages(unset)
    assert unset == ALLOCATOR_ENV == {"MIMALLOC_PURGE_DECOMMITS": "0"}
    chosen = {"MIMALLOC_PURGE_DECOMMITS": "1"}
    keep_freed_pages(chosen)
    assert chosen == {"MIMALLOC_PURGE_DECOMMITS": "1"}


def test_the_executors_python_workers_get_it_through_spark():
    assert EXECUTOR_ALLOCATOR_CONF == {"spark.executorEnv.MIMALLOC_PURGE_DECOMMITS": "0"}


def test_the_tiering_command_sets_it_before_pyarrow_loads(tmp_path):
    conf = write_conf(tmp_path / "tiering.toml", job="alloc", store_url="http://127.0.0.1:9", zk_hosts="127.0.0.1:9")
    statement = f"from tiering.cli import main; main(['status', '--conf', {str(conf)!r}, '--timeout', '0.5'])"
    assert _at_pyarrow_import(statement) == repr(ALLOCATOR_ENV)


def test_the_benchmarks_set_it_before_pyarrow_loads():
    assert _at_pyarrow_import("import benchmarks.common") == repr(ALLOCATOR_ENV)
