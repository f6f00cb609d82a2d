"""A real Spark standalone cluster from the pyspark package: one master, N workers, loopback only,
and the spark-submit command line that reaches it.

Shared by the ``spark_cluster`` fixture and ``benchmarks/bench_cluster.py``, so the benchmark
measures the deployment the tests check. Failure modes it guards against: a "cluster" that is
really one JVM (``local[N]`` shares the driver's filesystem and Python, hiding what executors
cannot reach), a web UI open to the network (Spark binds UIs to every interface unless
``SPARK_LOCAL_IP`` is set), and clusters left running (every daemon gets its own process group,
killed at teardown). Workers run the venv's Python (``PYSPARK_PYTHON``), as a real cluster's
workers run an interpreter with the service's dependencies installed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path

import pyspark

from tests.support.jvm import DAEMON_ENV, DEFAULTS_CONF
from tiering.ports import free_ports

SPARK_HOME = Path(pyspark.__file__).parent
#: pyspark's spark-submit next to this interpreter (the venv's bin), as users run it
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"
#: Client mode on loopback, no UI (it would bind every interface), small JVMs for 2 shared cores.
SUBMIT_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.driver.memory": "512m",
    "spark.executor.memory": "512m",
    "spark.sql.shuffle.partitions": "4",
}
_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n
"""


class SparkCluster:
    """``spark://127.0.0.1:<port>`` with ``workers`` workers of 1 core and 1 GiB each."""

    def __init__(self, directory: Path, workers: int = 2) -> None:
        self.directory = directory
        self.workers = workers
        self.port, self.ui_port, *self._worker_ports = free_ports(2 + 2 * workers)
        self._procs: list[subprocess.Popen] = []

    @property
    def master(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The environment of every Spark process of this cluster, spark-submit's included."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TIERING_", "SPARK_"))}
        env.update(
            SPARK_HOME=str(SPARK_HOME),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOCAL_HOSTNAME="localhost",
            SPARK_CONF_DIR=str(self.directory / "conf"),
            SPARK_LOCAL_DIRS=str(self.directory / "local"),
            SPARK_DAEMON_MEMORY="256m",
            **DAEMON_ENV,
            PYSPARK_PYTHON=sys.executable,
            PYSPARK_DRIVER_PYTHON=sys.executable,
        )
        return env

    def submit_command(
        self,
        script: Path,
        *args: str,
        py_files: Path | None = None,
        archives: str | None = None,
        conf: Mapping[str, str] | None = None,
    ) -> list[str]:
        """``spark-submit`` of ``script args`` to this master with :data:`SUBMIT_CONF` (``conf``
        adds or overrides keys), shipping ``py_files`` and ``archives`` (``PATH#NAME``) if given;
        run it with :meth:`env`."""
        settings = {**SUBMIT_CONF, **(conf or {})}
        return [
            str(SPARK_SUBMIT),
            "--master",
            self.master,
            *(["--py-files", str(py_files)] if py_files else []),
            *(["--archives", archives] if archives else []),
            *(item for key, value in settings.items() for item in ("--conf", f"{key}={value}")),
            str(script),
            *args,
        ]

    def start(self, timeout_s: float = 180.0) -> SparkCluster:
        (self.directory / "conf").mkdir(parents=True, exist_ok=True)
        (self.directory / "local").mkdir(exist_ok=True)
        (self.directory / "conf" / "log4j2.properties").write_text(_LOG4J)
        # the REST submission server would take the fixed port 6066
        defaults = {"spark.master.rest.enabled": "false", **DEFAULTS_CONF}
        (self.directory / "conf" / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in defaults.items()))
        self._daemon(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(self.ui_port),
        )
        for i in range(self.workers):
            work = self.directory / f"worker{i}"
            work.mkdir(exist_ok=True)
            self._daemon(
                f"worker{i}",
                "org.apache.spark.deploy.worker.Worker",
                self.master,
                "--host",
                "127.0.0.1",
                "--port",
                str(self._worker_ports[2 * i]),
                "--webui-port",
                str(self._worker_ports[2 * i + 1]),
                "--cores",
                "1",
                "--memory",
                "1g",
                "--work-dir",
                str(work),
            )
        deadline = time.monotonic() + timeout_s
        while self._alive_workers() < self.workers:
            if time.monotonic() > deadline or any(p.poll() is not None for p in self._procs):
                self.stop()
                raise RuntimeError(f"Spark cluster not up within {timeout_s:.0f}s; logs in {self.directory}")
            time.sleep(0.5)
        return self

    def __enter__(self) -> SparkCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        for proc in reversed(self._procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self._procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self._procs.clear()

    def _daemon(self, name: str, main_class: str, *args: str) -> None:
        with open(self.directory / f"{name}.log", "ab") as log:
            self._procs.append(
                subprocess.Popen(
                    [str(SPARK_HOME / "bin" / "spark-class"), main_class, *args],
                    env=self.env(),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )

    def _alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as response:
                state = json.load(response)
        except (OSError, ValueError):
            return 0
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")
