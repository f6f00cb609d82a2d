"""Chaos-test helpers: real `tiering run` drivers that get SIGKILLed, and the checks every
scenario ends with.

What a chaos scenario can break, and what each check here catches:
- rows lost or duplicated -> the lake is compared with the test's oracle row by row
  (:func:`assert_lakes_equal`, from the pipeline harness);
- a lease nobody releases -> :func:`assert_leases_lapse`: once its duration has passed the
  store holds no lease at all (a crashed driver's lease must expire, a clean stop drops it);
- files in the lake that nothing will ever delete -> :func:`assert_no_orphans`: every file
  under the table directory (outside ``_delta_log`` and ``_staging``) is either active in the
  Delta table or listed by a ``VACUUM`` dry run with zero retention.

Drivers run in their own process group: a kill takes the Python driver and its JVM (and the
JVM's Python workers) together, like a lost container, and nothing lingers into the next
trial.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import tomli_w
from deltalake import DeltaTable

from tests.integration.pipeline.harness import TableOracle, assert_lake_equals, lake_rows, wait_until
from tiering.failpoints import ENV as FAILPOINTS_ENV
from tiering.kvstore.client import KvStoreClient

SPARK_CONF = {
    "spark.master": "local[2]",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.memory": "1g",
}
#: Every chaos run uses a short lease so a crashed driver's lease lapses within a trial.
LEASE_S = 6.0
#: How long after a driver's death its ZooKeeper session (and leadership) lingers.
SESSION_TIMEOUT_S = 3.0


def write_conf(path: Path, *, job: str, checkpoint: Path, lake: Path, store_url: str, zk_hosts: str, **sections) -> Path:
    """A `tiering run` TOML config; ``sections`` override or add whole sections' keys."""
    conf: dict = {
        "job": {"name": job, "checkpoint": str(checkpoint)},
        "kvstore": {"url": store_url},
        "zookeeper": {"hosts": zk_hosts, "session_timeout_s": SESSION_TIMEOUT_S},
        "lake": {"root": str(lake)},
        "lease": {"duration_s": LEASE_S, "renew": True},
        "spark": dict(SPARK_CONF),
    }
    for section, values in sections.items():
        conf.setdefault(section, {}).update(values)
    path.write_bytes(tomli_w.dumps(conf).encode())
    return path


def driver_env(failpoint: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERING_") and k != FAILPOINTS_ENV}
    env["PYSPARK_PYTHON"] = sys.executable
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    if failpoint:
        env[FAILPOINTS_ENV] = failpoint
    return env


@dataclass
class Driver:
    """One `tiering run --available-now` process group, its output collected as it runs."""

    proc: subprocess.Popen
    started: float = field(default_factory=time.monotonic)
    lines: list[str] = field(default_factory=list)
    _reader: threading.Thread | None = None

    @classmethod
    def spawn(cls, conf: Path, failpoint: str | None = None) -> Driver:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tiering.cli", "run", "--conf", str(conf), "--available-now"],
            env=driver_env(failpoint), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )
        driver = cls(proc)
        driver._reader = threading.Thread(target=driver._read, daemon=True)
        driver._reader.start()
        return driver

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def saw(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))

    def output(self, last: int = 60) -> str:
        return "\n".join(self.lines[-last:])

    def wait(self, timeout_s: float = 300) -> int:
        try:
            rc = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"driver still running after {timeout_s}s:\n{self.output()}") from None
        self._reap_group()
        return rc

    def kill(self) -> None:
        """SIGKILL the driver and everything it started (JVM, Python workers)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)
        self._reap_group()

    def _reap_group(self) -> None:
        """The driver is gone; make sure its JVM and workers are too before the next trial."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if self._reader is not None:
            self._reader.join(timeout=10)


def run_driver(conf: Path, failpoint: str | None = None, timeout_s: float = 300) -> tuple[int, str]:
    driver = Driver.spawn(conf, failpoint)
    rc = driver.wait(timeout_s)
    return rc, driver.output(200)


def assert_lakes_equal(lake_root: Path, tables: list[TableOracle]) -> None:
    for table in tables:
        assert_lake_equals(lake_root, table)


def assert_no_duplicates(lake_root: Path, tables: list[TableOracle]) -> None:
    """Holds at any time, even right after a kill: one row per key (lake_rows asserts it)."""
    for table in tables:
        if (lake_root / table.name / "_delta_log").exists():
            lake_rows(lake_root, table.name)


def files_outside_the_log(table_dir: Path) -> set[str]:
    found = set()
    for root, dirs, files in os.walk(table_dir):
        dirs[:] = [d for d in dirs if d not in ("_delta_log", "_staging")]
        found.update(os.path.realpath(os.path.join(root, f)) for f in files)
    return found


def _as_path(uri: str, table_dir: Path) -> str:
    if uri.startswith("file://"):
        uri = uri[len("file://"):]
    return os.path.realpath(uri if os.path.isabs(uri) else os.path.join(table_dir, uri))


def orphans(table_dir: Path) -> tuple[set[str], set[str]]:
    """``(unreferenced, not_vacuumable)``: files no active add action references, and those of
    them a zero-retention VACUUM dry run (full mode: it also lists never-committed files) would
    not delete."""
    dt = DeltaTable(str(table_dir))
    active = {_as_path(u, table_dir) for u in dt.file_uris()}
    unreferenced = files_outside_the_log(table_dir) - active
    vacuumable = {
        _as_path(p, table_dir)
        for p in dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=True, full=True)
    }
    return unreferenced, unreferenced - vacuumable


def assert_no_orphans(lake_root: Path, tables: list[TableOracle]) -> None:
    for table in tables:
        table_dir = lake_root / table.name
        if not (table_dir / "_delta_log").exists():
            continue
        _, stuck = orphans(table_dir)
        assert not stuck, f"{table.name}: {len(stuck)} files neither active nor vacuumable: {sorted(stuck)[:5]}"


def assert_leases_lapse(client: KvStoreClient, duration_s: float = LEASE_S) -> None:
    """No lease survives its duration: a crashed driver's lease expires, a live one was dropped."""
    wait_until(lambda: client.list_leases() == [], timeout_s=duration_s + 5, interval_s=0.25,
               what=f"every lease to lapse within {duration_s}s")
