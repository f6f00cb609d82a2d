"""`tiering status --watch` in a real terminal (tmux), and every table printed off a terminal
with its names whole.

Real ZooKeeper and store processes; no Spark (status needs none). The tables are never tiered,
so their lag is every write: a number the test controls, and watches change. A watch builds the
job's lake and checkpoint once, not at every refresh.
"""

from __future__ import annotations

import io
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from rich.console import Console

from tests.support.config import write_conf
from tests.support.drivers import REPO, driver_env, tiering_cli
from tests.support.oracle import TableOracle
from tests.support.running import in_thread
from tests.support.waiting import wait_until
from tiering.cli import EXIT_OK
from tiering.conf.loader import load_config
from tiering.delta_log.lake import Lake
from tiering.ops.status_view import watch_status
from tiering.state import checkpoint_store

pytestmark = pytest.mark.integration

#: longer than rich would leave them in 80 columns beside ten other columns
LONG_NAMES = ("orders_of_the_european_webshop_2026", "leases_and_contracts_of_every_tenant")


def watched(store, zk_hosts: str, job: str, tmp_path: Path) -> Path:
    """The two tables, written and never tiered, in ``store``; the job's conf."""
    client = store.client()
    for rows, name in zip((30, 12), LONG_NAMES, strict=False):
        TableOracle(client, name, num_buckets=2).upsert(range(rows))
    return write_conf(tmp_path / "tiering.toml", job=job, store_url=store.url, zk_hosts=zk_hosts)


@pytest.fixture
def conf(kv_store, zk_server, unique_job, tmp_path) -> Path:
    return watched(kv_store, zk_server.hosts, unique_job, tmp_path)


class Tmux:
    """A tmux server of the test's own (its own socket), one window running a plain shell."""

    def __init__(self, width: int = 250, height: int = 50) -> None:
        self.socket = f"kv-tiering-test-{uuid.uuid4().hex[:8]}"
        env = " ".join(
            f"{k}={shlex.quote(v)}" for k, v in {**driver_env(), "PS1": "$ ", "TERM": "xterm-256color"}.items()
        )
        self.tmux(
            "new-session",
            "-d",
            "-s",
            "watch",
            "-x",
            str(width),
            "-y",
            str(height),
            f"env -i {env} bash --noprofile --norc",
        )

    def tmux(self, *argv: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *argv],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        return done.stdout

    def type(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "watch", *keys)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "watch")

    def wait_for(self, what: str, predicate) -> str:
        return wait_until(lambda: (lambda s: s if predicate(s) else None)(self.screen()), what, timeout_s=60)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)


@pytest.fixture
def terminal():
    if subprocess.run(["which", "tmux"], capture_output=True).returncode != 0:
        pytest.skip("tmux not installed: scripts/setup.sh installs it (Debian's tmux package)")
    term = Tmux()
    yield term
    term.close()


def lag_of(screen: str, table: str) -> int | None:
    """The lag column of ``table``'s row on the screen (the 5th cell)."""
    for line in screen.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) > 5 and cells[1] == table:
            return int(cells[5])
    return None


def test_watch_redraws_the_live_table_until_ctrl_c_which_exits_0(conf, terminal, kv_store, unique_job):
    orders, leases = LONG_NAMES
    command = (
        f"cd {shlex.quote(str(REPO))} && {shlex.quote(sys.executable)} -m tiering.cli status --watch "
        f"--interval 0.5 --conf {shlex.quote(str(conf))}; echo exit=$?"
    )
    terminal.type(command, "Enter")

    first = terminal.wait_for(
        "the table with both tables' lag", lambda s: lag_of(s, orders) == 30 and lag_of(s, leases) == 12
    )
    assert f"job {unique_job}  leader none  epoch never led" in first and "Ctrl-C quits" in first

    kv_store.client().upsert(orders, [{"id": i, "name": "n", "amount": 1.0, "qty": 1} for i in range(100, 107)])
    terminal.wait_for("the lag of the new writes", lambda s: lag_of(s, orders) == 37)

    terminal.type("C-c")
    last = terminal.wait_for("the exit status, then the shell prompt", lambda s: re.search(r"exit=\d+\n\$", s))
    assert "exit=0" in last, last
    assert "Traceback" not in last and "KeyboardInterrupt" not in last and "kazoo" not in last, last
    assert lag_of(last, orders) == 37, "the last view stays on screen"
    assert last.count(orders) == 1, "redrawn in place, not printed again"


def watching_into(log: Path, conf: Path) -> subprocess.Popen:
    """`tiering status --watch` with its output in ``log``: not a terminal."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERING_")}
    with open(log, "w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tiering.cli", "status", "--watch", "--interval", "0.2", "--conf", str(conf)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )


def test_off_a_terminal_no_name_is_shortened(conf, tmp_path):
    printed = tiering_cli("status", "--conf", str(conf))
    assert printed.returncode == EXIT_OK, printed.stderr
    assert all(name in printed.stdout for name in LONG_NAMES) and "…" not in printed.stdout, printed.stdout

    log = tmp_path / "watch.log"
    watch = watching_into(log, conf)
    try:
        wait_until(lambda: log.read_text().count(LONG_NAMES[0]) >= 2, "two refreshes in the log", timeout_s=60)
    finally:
        watch.send_signal(signal.SIGINT)
        assert watch.wait(30) == EXIT_OK
    text = log.read_text()
    assert "…" not in text and "Traceback" not in text and "\x1b[" not in text, text
    assert all(lag_of(block, LONG_NAMES[0]) == 30 for block in text.split("\n\n") if LONG_NAMES[0] in block)


def test_a_watch_builds_the_lake_and_the_checkpoint_once(conf, monkeypatch):
    built: list[str] = []
    lake_of, open_checkpoint = Lake.of.__func__, checkpoint_store.open_checkpoint
    monkeypatch.setattr(Lake, "of", classmethod(lambda cls, c: built.append("lake") or lake_of(cls, c)))
    monkeypatch.setattr(
        checkpoint_store, "open_checkpoint", lambda *a: built.append("checkpoint") or open_checkpoint(*a)
    )
    out, stop = io.StringIO(), threading.Event()
    console = Console(file=out, width=250)

    watcher, box = in_thread(lambda: watch_status(load_config(conf, {}), 0.05, console, timeout_s=10, stop=stop))
    try:
        wait_until(lambda: out.getvalue().count(LONG_NAMES[0]) >= 3, "three refreshes", timeout_s=60)
    finally:
        stop.set()
        watcher.join(30)

    assert "error" not in box, box.get("error")
    assert sorted(built) == ["checkpoint", "lake"], "built once for the watch, read at every refresh"
    assert all(lag_of(block, LONG_NAMES[0]) == 30 for block in out.getvalue().split("\n\n") if LONG_NAMES[0] in block)


def test_a_failed_refresh_keeps_the_last_status_and_says_why(store_factory, zk_server, unique_job, tmp_path):
    kv_store = store_factory()  # its own: the test stops it
    conf = watched(kv_store, zk_server.hosts, unique_job, tmp_path)
    log = tmp_path / "watch.log"
    watch = watching_into(log, conf)
    try:
        wait_until(lambda: LONG_NAMES[0] in log.read_text(), "the first status", timeout_s=60)
        kv_store.stop()
        wait_until(lambda: "refresh failed at" in log.read_text(), "a failed refresh", timeout_s=60)
    finally:
        watch.send_signal(signal.SIGINT)
        assert watch.wait(30) == EXIT_OK
    failed = log.read_text().split("refresh failed at", 1)[1]
    assert kv_store.url.split("//")[1] in failed.splitlines()[0], failed[:500]
    assert lag_of(failed, LONG_NAMES[0]) == 30, "the last status stays, under the error"


def test_ctrl_c_inside_a_refresh_lets_it_finish_then_exits_0(kv_store, unique_job, tmp_path):
    """A refresh interrupted inside kazoo or the store client's retries leaves a client half
    started or half stopped; the refresh under way ends (within --timeout), then the watch does."""
    with socket.socket() as silent:  # a ZooKeeper that takes connections and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        hosts = f"127.0.0.1:{silent.getsockname()[1]}"
        conf = write_conf(tmp_path / "tiering.toml", job=unique_job, store_url=kv_store.url, zk_hosts=hosts)
        log = tmp_path / "watch.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("TIERING_")}
        argv = ["status", "--watch", "--interval", "0.2", "--timeout", "4", "--conf", str(conf)]
        with open(log, "w") as out:
            watch = subprocess.Popen(
                [sys.executable, "-m", "tiering.cli", *argv], env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO
            )
        try:
            wait_until(lambda: "refresh failed at" in log.read_text(), "a first failed refresh", timeout_s=60)
            printed = log.read_text().count("refresh failed at")
            time.sleep(1.0)  # the next refresh waits on the silent ZooKeeper for its --timeout
        finally:
            watch.send_signal(signal.SIGINT)
            assert watch.wait(30) == EXIT_OK
    text = log.read_text()
    assert "Traceback" not in text and "KeyboardInterrupt" not in text and "kazoo" not in text, text
    assert text.count("refresh failed at") == printed + 1, "the refresh under way when Ctrl-C came finished"
