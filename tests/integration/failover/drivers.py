"""Real `tiering run` drivers for whole-job failover tests, and what the lake says they did.

A driver is judged by its effects, not its logs: the Delta history records the epoch and round
of every tiering commit, ZooKeeper records who leads, the store records the lease's epoch.
Each driver runs in its own process group (its JVM and Python workers included), so a test can
freeze the whole "machine" with SIGSTOP and teardown can reap everything it started.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import tomli_w
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from tests.integration.pipeline.harness import TableOracle, assert_lake_equals
from tiering.lakestate.layout import METADATA_KEY

REPO = Path(__file__).resolve().parents[3]


def write_conf(tmp_path: Path, job: str, store_url: str, zk_hosts: str, session_timeout_s: float = 4.0) -> Path:
    """A continuous-mode config: a round every second, a short ZooKeeper session."""
    conf = {
        "job": {"name": job, "checkpoint": str(tmp_path / "ckpt")},
        "kvstore": {"url": store_url},
        "zookeeper": {"hosts": zk_hosts, "session_timeout_s": session_timeout_s},
        "lake": {"root": str(tmp_path / "lake")},
        "trigger": {"available_now": False, "interval_s": 1.0},
        "lease": {"duration_s": 120.0},
        "spark": {
            "spark.master": "local[2]",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.memory": "512m",
        },
    }
    path = tmp_path / "tiering.toml"
    path.write_bytes(tomli_w.dumps(conf).encode())
    return path


class Driver:
    """One ``tiering run --conf`` process; output goes to ``<log>`` (never a pipe that can fill)."""

    def __init__(self, conf: Path, log: Path) -> None:
        self.log = log
        env = {k: v for k, v in os.environ.items() if not k.startswith("TIERING_")}
        env["PYSPARK_PYTHON"] = sys.executable
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tiering.cli", "run", "--conf", str(conf)],
                cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )
        self.pid = self.proc.pid

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the driver process only (its JVM notices a dead parent by itself)."""
        os.kill(self.pid, sig)

    def freeze(self) -> None:
        """SIGSTOP the whole process group: a paused machine, JVM and Python workers included."""
        os.killpg(self.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.killpg(self.pid, signal.SIGCONT)

    def wait(self, timeout_s: float) -> int:
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"driver {self.pid} still running after {timeout_s}s:\n{self.tail()}") from None

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.output().splitlines()[-lines:])

    def reap(self) -> None:
        """Teardown: whatever is left of the group (a frozen or orphaned JVM) is killed."""
        try:
            os.killpg(self.pid, signal.SIGCONT)
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


@dataclass(frozen=True)
class Commit:
    version: int
    epoch: int
    round: int
    lease_id: str


def tiering_commits(lake_root: Path, table: str) -> list[Commit]:
    """Every tiering commit of ``table``, oldest first (empty before the table exists)."""
    try:
        history = DeltaTable(str(lake_root / table)).history()
    except TableNotFoundError:
        return []
    commits = []
    for entry in history:
        meta = entry.get(METADATA_KEY)
        if meta is None:
            continue
        meta = json.loads(meta) if isinstance(meta, str) else meta
        commits.append(Commit(entry["version"], meta["epoch"], meta["round"], meta["lease_id"]))
    return sorted(commits, key=lambda c: c.version)


def lake_matches(lake_root: Path, oracle: TableOracle) -> bool:
    try:
        assert_lake_equals(lake_root, oracle)
    except (AssertionError, TableNotFoundError):
        return False
    return True


class Writer:
    """Keeps writing to the store (upserts and deletes) from a thread until stopped."""

    def __init__(self, oracles: list[TableOracle], key_space: int = 300, pause_s: float = 1.0) -> None:
        self.oracles = oracles
        self.key_space = key_space
        self.pause_s = pause_s
        self.batches = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="store-writer", daemon=True)

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        if self.error is not None:
            raise AssertionError(f"the store writer failed after {self.batches} batches: {self.error!r}")

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.pause_s):
                for oracle in self.oracles:
                    oracle.churn(5, key_space=self.key_space)
                self.batches += 1
        except BaseException as e:  # reported by stop() in the test's thread
            self.error = e
