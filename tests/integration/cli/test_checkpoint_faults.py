"""Start-up and shutdown speak plainly, through real `tiering run` processes.

- A checkpoint Spark would trip over (``offsets`` a file: Spark's bare ``AssertionError``) is
  refused before the query starts, naming the path; exit 1; lake and checkpoint untouched.
- A clean stop, at the end of an availableNow run, on SIGTERM or on Ctrl-C, prints no stack trace.
- A read-only checkpoint, and one on a full disk at start or filling up mid-run, stop the job
  with one line naming the checkpoint; once the fault is fixed the next start resumes with no
  manual repair, and the lake equals the store (no row lost, none twice). The tiering that leaves
  the checkpoint to break is the test session's own Spark running the leader loop
  (:func:`tiering.job.run_as_leader`), as a driver would, without a driver JVM to start: every run
  whose exit and output are checked is a `tiering run` process.
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests.support.config import SPARK_LOCAL, write_conf
from tests.support.drivers import Driver, run_driver, tiering_cli
from tests.support.mounts import fill, read_only, small_tmpfs
from tests.support.oracle import TableOracle, assert_lakes_equal, lake_matches
from tests.support.waiting import wait_until
from tiering.cli import EXIT_FAILURE, EXIT_OK
from tiering.conf.loader import load_config
from tiering.job import run_as_leader

pytestmark = pytest.mark.integration

#: What a Java or Python stack trace leaves in a process's output.
STACK_TRACE = re.compile(r"Exception|Traceback|^\s+at \S+\(", re.MULTILINE)


@pytest.fixture
def table(kv_store) -> TableOracle:
    t = TableOracle(kv_store.client(), "orders", num_buckets=2, seed=20)
    t.upsert(range(100))
    kv_store.client().take_snapshots(t.name)
    t.churn(30, key_space=150)
    return t


def conf_for(tmp_path: Path, kv_store, zk_server, checkpoint: Path | None = None, **sections: dict) -> Path:
    return write_conf(
        tmp_path / "tiering.toml",
        job="faults",
        store_url=kv_store.url,
        zk_hosts=zk_server.hosts,
        checkpoint=checkpoint,
        zookeeper={"session_timeout_s": 4.0},
        spark=SPARK_LOCAL,
        **sections,
    )


def tier_in_session(conf: Path) -> None:
    """What `tiering run --conf <conf> --available-now` does, in the test's process on its session."""
    assert run_as_leader(load_config(conf, env={}, overrides={"trigger.available_now": True})).ok


def assert_clean(rc: int, output: str) -> None:
    assert rc == EXIT_OK, output[-3000:]
    trace = STACK_TRACE.search(output)
    assert trace is None, output[max(0, trace.start() - 1500) : trace.start() + 1500]


def assert_refused_naming(rc: int, output: str, *named: str) -> None:
    assert rc == EXIT_FAILURE, output[-3000:]
    line = output[output.rindex("tiering: ") :].splitlines()[0]  # the CLI's own line; the log may follow it
    for text in named:
        assert text in line, line


def versions(lake: Path) -> dict[str, int]:
    return {t.name: DeltaTable(str(t)).version() for t in sorted(lake.iterdir())}


def tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def test_an_offsets_log_that_is_a_file_is_named_before_the_query_starts(kv_store, zk_server, table, tmp_path):
    conf = conf_for(tmp_path, kv_store, zk_server)
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "offsets").write_text("")
    before = tree(ckpt)

    result = tiering_cli("run", "--conf", str(conf), "--available-now")

    assert_refused_naming(result.returncode, result.stderr, str(ckpt / "offsets"), "is a file; expected a directory")
    assert "AssertionError" not in result.stderr
    assert tree(ckpt) == before
    assert not (tmp_path / "lake").exists()


def test_a_clean_stop_on_sigterm_prints_no_stack_trace(kv_store, zk_server, table, tmp_path):
    conf = conf_for(tmp_path, kv_store, zk_server, trigger={"interval_s": 1.0})
    driver = Driver(conf)
    wait_until(
        lambda: driver.saw("status=committed") or driver.proc.poll() is not None, "a committed round", timeout_s=240
    )

    driver.signal(signal.SIGTERM)

    assert_clean(driver.wait(), driver.output())
    assert "stopped after" in driver.output()


def test_ctrl_c_stops_as_cleanly_as_sigterm(kv_store, zk_server, table, tmp_path):
    """A terminal's Ctrl-C reaches the whole process group: the driver, its JVM, its Python workers."""
    conf = conf_for(tmp_path, kv_store, zk_server, trigger={"interval_s": 1.0})
    driver = Driver(conf)
    wait_until(
        lambda: driver.saw("status=committed") or driver.proc.poll() is not None, "a committed round", timeout_s=240
    )

    os.killpg(driver.pid, signal.SIGINT)

    assert_clean(driver.wait(), driver.output())
    assert "SIGINT: stopping between rounds" in driver.output()
    assert "stopped after" in driver.output()


def test_sigterm_while_a_trigger_runs_lets_it_end_then_stops_cleanly(kv_store, zk_server, table, tmp_path):
    """The store paused under a trigger holds it mid-way (the planning's log ends, or the round's
    calls): SIGTERM then waits for that trigger instead of interrupting Spark's stream thread
    in it, and the stop is clean once the store is back."""
    conf = conf_for(tmp_path, kv_store, zk_server, trigger={"interval_s": 1.0})
    driver = Driver(conf)
    wait_until(
        lambda: driver.saw("status=committed") or driver.proc.poll() is not None, "a committed round", timeout_s=240
    )
    table.churn(30, key_space=150)
    wait_until(lambda: lake_matches(tmp_path / "lake", table), "the churn tiered", timeout_s=120)

    os.kill(kv_store.pid, signal.SIGSTOP)
    try:
        time.sleep(3.0)  # an idle trigger starts within the 1 s interval and waits on the store
        driver.signal(signal.SIGTERM)
        wait_until(lambda: driver.saw("for the running round to end"), "the stop waiting for the trigger", timeout_s=30)
    finally:
        os.kill(kv_store.pid, signal.SIGCONT)

    assert_clean(driver.wait(), driver.output())
    assert "stopped after" in driver.output()
    assert_lakes_equal(tmp_path / "lake", [table])


def test_a_read_only_checkpoint_is_named_and_the_next_start_resumes(spark, kv_store, zk_server, table, tmp_path):
    conf = conf_for(tmp_path, kv_store, zk_server)
    ckpt, lake = tmp_path / "ckpt", tmp_path / "lake"
    tier_in_session(conf)
    table.churn(30, key_space=150)
    tiered = versions(lake)

    with read_only(ckpt):
        assert_refused_naming(*run_driver(conf), str(ckpt), "Read-only file system")
    assert versions(lake) == tiered

    assert_clean(*run_driver(conf))
    assert_lakes_equal(lake, [table])


def test_a_full_checkpoint_disk_is_named_at_start_and_mid_run_and_the_next_start_resumes(
    spark, kv_store, zk_server, table, tmp_path
):
    lake = tmp_path / "lake"
    with small_tmpfs(tmp_path / "disk", size_kib=1024) as disk:
        ckpt = disk / "ckpt"
        conf = conf_for(tmp_path, kv_store, zk_server, checkpoint=ckpt)
        tier_in_session(conf)
        table.churn(30, key_space=150)
        tiered = versions(lake)
        filler = fill(disk)

        assert_refused_naming(*run_driver(conf), str(ckpt), "No space left on device")
        assert versions(lake) == tiered

        # Room for the start-up probe and the round's offsets entry, not for the rest of the round.
        os.truncate(filler, filler.stat().st_size - 8192)
        assert_refused_naming(*run_driver(conf), "query failed on its checkpoint", str(ckpt), "No space left on device")

        filler.unlink()
        assert_clean(*run_driver(conf))
    assert_lakes_equal(lake, [table])
