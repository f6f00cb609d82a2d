"""The Fluss benchmark's hand-written changelog copy keeps the last change of each key, as a round does;
its check of the job's lake fails a lake that differs from the copy or from what was written; the CPU
it reports for a step counts the processes the step ran below it, finished or running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pyarrow as pa
import pytest

from benchmarks.bench_fluss import SCHEMA, _last_per_key, _row, check_lake, tree_cpu_s

pytestmark = pytest.mark.unit


def test_the_last_change_of_each_key_is_kept_a_delete_included():
    changes = pa.table(
        {
            "id": [1, 2, 1, 3, 2],
            "note": ["a", "b", "c", "d", None],
            "__op": ["+I", "+I", "+U", "+I", "-D"],
        }
    )

    last = _last_per_key(changes)

    assert sorted(last.to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "note": "c", "__op": "+U"},
        {"id": 2, "note": None, "__op": "-D"},
        {"id": 3, "note": "d", "__op": "+I"},
    ]


def _written(rows: int, updates: int) -> pa.Table:
    return pa.Table.from_pylist([_row(k, int(k < updates)) for k in range(rows)], schema=SCHEMA)


def test_a_lake_equal_to_the_copy_and_to_what_was_written_passes():
    assert check_lake(_written(50, 20), _written(50, 20), rows=50, updates=20) == 50


def test_a_lake_missing_a_row_the_copy_has_fails():
    lake = _written(50, 20)
    with pytest.raises(AssertionError, match="49 rows"):
        check_lake(lake.slice(0, 49), lake, rows=50, updates=20)


def test_a_lake_equal_to_a_wrong_copy_fails_on_a_sampled_key():
    stale = _written(50, 0)  # the updates never applied, on both sides
    with pytest.raises(AssertionError, match="key 0"):
        check_lake(stale, stale, rows=50, updates=20)


#: a child that spends about a second of CPU (a fixed amount of work, whatever the load), then sleeps
_BUSY = (
    "import sys, time\nn = 0\nwhile time.process_time() < 1.0: n += 1\n"
    "print('done', flush=True)\ntime.sleep(float(sys.argv[1]))"
)


def test_the_cpu_of_a_step_counts_a_finished_child_and_a_running_grandchild():
    before = tree_cpu_s()
    subprocess.run([sys.executable, "-c", _BUSY, "0"], check=True)
    # a grandchild still running: a child that starts it and waits, as Spark's JVM runs Python workers
    nested = (
        f"import subprocess, sys; child = subprocess.Popen([sys.executable, '-c', {_BUSY!r}, '30']); "
        "print(child.pid, flush=True); child.wait()"
    )
    with subprocess.Popen([sys.executable, "-c", nested], stdout=subprocess.PIPE, text=True) as parent:
        assert parent.stdout is not None
        grandchild = int(parent.stdout.readline())
        try:
            assert parent.stdout.readline() == "done\n"
            spent = tree_cpu_s() - before
        finally:
            os.kill(grandchild, signal.SIGKILL)

    assert spent >= 1.8  # two children's second each (the interpreters' starts come on top)
