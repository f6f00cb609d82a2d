"""`tiering demo` end to end: it verifies the lake against the store (or, with ``--store fluss``,
against a Fluss cluster of its own) and leaves no process behind.

The demo prints the pids of the ZooKeeper and store processes it starts; after it exits (done
or interrupted) those pids must be gone. Its output written to a file, as a CI job or
`> demo.log` keeps it, holds every table whole (no `orde…`, no `leas…`: rich gave a non-terminal
80 columns) and each on its own lines.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import pytest
from deltalake import DeltaTable

from tests.support.fluss import skip_without_fluss
from tiering.cli import EXIT_INTERRUPTED, EXIT_OK

pytestmark = pytest.mark.integration


def demo(*args: str, out: IO[str] | None = None) -> subprocess.Popen:
    """`tiering demo`, its output piped to the test (160 columns) or written into ``out`` as a CI job
    keeps it (no ``COLUMNS``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERING_") and k != "COLUMNS"}
    if out is None:
        env["COLUMNS"] = "160"
    return subprocess.Popen(
        [sys.executable, "-m", "tiering.cli", "demo", *args],
        env=env,
        text=True,
        stdout=out or subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def interrupted(proc: subprocess.Popen, line: str, after_s: float) -> tuple[str, int]:
    """The demo's output and exit code after a Ctrl-C sent ``after_s`` past the first line holding ``line``."""
    lines = []
    for printed in proc.stdout or ():
        lines.append(printed)
        if line in printed:
            break
    time.sleep(after_s)  # into the phase that line opens
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=120)
    return "".join(lines) + rest, proc.returncode


def child_pids(output: str, expected: int = 3) -> list[int]:
    """ZooKeeper's, the store's, the S3 server's (--lake s3) and (once started) the Spark driver JVM's."""
    pids = [
        int(p)
        for p in re.findall(r"demo: (?:ZooKeeper|KV store|S3 server \(SeaweedFS\)|Spark driver JVM) pid (\d+)", output)
    ]
    assert len(pids) == expected, output
    return pids


def mentioning(data_dir: Path) -> list[int]:
    """Live processes whose command line names ``data_dir``: the store, ZooKeeper, the Spark JVM."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if (
                proc.name.isdigit()
                and str(data_dir).encode() in (proc / "cmdline").read_bytes()
                and alive(int(proc.name))
            ):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def all_gone(pids: list[int], data_dir: Path, timeout_s: float = 15.0) -> bool:
    """The Spark JVM exits once its parent's pipe closes, a moment after the demo itself."""
    deadline = time.monotonic() + timeout_s
    while any(alive(pid) for pid in pids) or mentioning(data_dir):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its parent, which is gone) counts as gone
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_demo_tiers_while_writing_and_verifies_every_row_in_a_log_that_shortens_no_name(tmp_path):
    log = tmp_path / "demo.log"
    with open(log, "w") as written:
        proc = demo("--duration", "6", "--tables", "3", "--data-dir", str(tmp_path / "demo"), out=written)
        proc.wait(timeout=400)
    out = log.read_text()

    assert proc.returncode == EXIT_OK, out[-4000:]
    assert "demo: lake == store for every table" in out
    assert len(re.findall(r"│ (orders|customers|inventory) .*EQUAL", out)) == 3, out[-3000:]
    for table in ("orders", "customers", "inventory"):
        assert DeltaTable(str(tmp_path / "demo" / "lake" / table)).version() >= 0
    assert all_gone(child_pids(out), tmp_path / "demo")
    assert "…" not in out and "\x1b[" not in out, out
    rows = [line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│")]
    assert rows == ["orders", "customers", "inventory"] * 2, out  # the live view's last state, then the check
    assert "leased" in out and "lake vs store, row by row" in out
    caption = next(line for line in out.splitlines() if "log end / lake:" in line)
    assert "lake vs store" not in caption, "the live view's last line ends before the next table"


def test_demo_with_an_s3_lake_verifies_every_row(tmp_path):
    proc = demo("--duration", "6", "--tables", "2", "--lake", "s3", "--data-dir", str(tmp_path / "demo"))
    out, _ = proc.communicate(timeout=400)

    assert proc.returncode == EXIT_OK, out[-4000:]
    assert "lake in s3://demo" in out and "demo: lake == store for every table" in out
    assert len(re.findall(r"│ (orders|customers) .*EQUAL", out)) == 2, out[-3000:]
    assert not (tmp_path / "demo" / "lake").exists(), "the lake is in S3, not on local disk"
    assert all_gone(child_pids(out, expected=4), tmp_path / "demo")


def test_ctrl_c_stops_the_demo_and_its_processes(tmp_path):
    out, code = interrupted(
        demo("--duration", "120", "--tables", "1", "--data-dir", str(tmp_path / "demo")), "Spark driver JVM pid", 5
    )

    assert code == EXIT_INTERRUPTED, out[-3000:]
    assert "demo: stopped every process it started" in out
    assert all_gone(child_pids(out), tmp_path / "demo")
    assert "lake == store" not in out


def test_ctrl_c_while_spark_starts_still_cleans_up(tmp_path):
    out, code = interrupted(
        demo("--duration", "120", "--tables", "1", "--data-dir", str(tmp_path / "demo")), "starting Spark", 1
    )

    assert code == EXIT_INTERRUPTED, out[-3000:]
    assert all_gone(child_pids(out, expected=2), tmp_path / "demo")


def fluss_pids(output: str) -> list[int]:
    """The Fluss cluster's three JVMs (`demo: Fluss cluster pids zookeeper N, coordinator N, tablet N`)."""
    line = next(line for line in output.splitlines() if line.startswith("demo: Fluss cluster pids"))
    pids = [int(p) for p in re.findall(r"(?:zookeeper|coordinator|tablet) (\d+)", line)]
    assert len(pids) == 3, line
    return pids


def test_demo_with_fluss_tiers_its_snapshots_then_its_changelog_and_verifies_every_row(tmp_path):
    skip_without_fluss()
    proc = demo("--store", "fluss", "--data-dir", str(tmp_path / "demo"))
    out, _ = proc.communicate(timeout=600)

    assert proc.returncode == EXIT_OK, out[-4000:]
    assert "demo: tiering bootstrap from the KV snapshots" in out and "demo: tiering the changelog" in out
    assert re.search(r"│ orders .*EQUAL", out) and "demo: lake == Fluss" in out, out[-3000:]
    assert all_gone(child_pids(out, expected=2) + fluss_pids(out), tmp_path / "demo")


def test_ctrl_c_stops_the_fluss_demo_and_its_fluss_cluster(tmp_path):
    skip_without_fluss()
    out, code = interrupted(
        demo("--store", "fluss", "--data-dir", str(tmp_path / "demo")), "demo: tiering bootstrap", 3
    )

    assert code == EXIT_INTERRUPTED, out[-3000:]
    assert "demo: stopped every process it started" in out and "lake == Fluss" not in out
    assert all_gone(child_pids(out, expected=2) + fluss_pids(out), tmp_path / "demo")
