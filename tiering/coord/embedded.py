"""A real standalone ZooKeeper server, started from the jars pyspark already ships (docs/DESIGN.md §7).

Failure modes it guards against: a port another process listens on is refused before the JVM
starts (another ZooKeeper there would answer the serving probe for it); a JVM that dies at
startup (a port taken meanwhile, bad data dir) is reported with the tail of its log instead of a
bare timeout; a test run that crashes does not leave JVMs behind (the server dies with the
process that started it, via PR_SET_PDEATHSIG on Linux); a "started" server is one that reports
a serving mode over ``srvr``, not one whose process merely exists (``ruok`` answers ``imok``
before the server accepts sessions).

It is no mock: tests stop, SIGKILL and SIGSTOP it to exercise session expiry and fencing.
The server listens on loopback only, with the admin server off, and keeps its data, config and
log in one directory so ``restart()`` finds the same znodes (the epoch survives restarts).
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import BinaryIO

from tiering.children import die_with_parent, log_tail, terminate
from tiering.errors import CoordinationError
from tiering.java import find_java
from tiering.ports import free_port, listening

__all__ = ["EmbeddedZooKeeper", "run_foreground", "zookeeper_classpath"]

log = logging.getLogger(__name__)

_MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
# The server's runtime closure inside pyspark/jars: ZooKeeper itself, its wire format (jute),
# logging (slf4j -> log4j2), CLI parsing, annotations, and the Dropwizard metrics its default
# metrics provider loads at startup. Netty is not needed: the default NIO connection factory
# is used.
_JAR_PATTERNS = (
    "zookeeper-[0-9]*.jar",
    "zookeeper-jute-*.jar",
    "slf4j-api-*.jar",
    "log4j-api-*.jar",
    "log4j-core-*.jar",
    "log4j-slf4j2-impl-*.jar",
    "commons-cli-*.jar",
    "audience-annotations-*.jar",
    "metrics-core-*.jar",
    "snappy-java-*.jar",
)
_LOG4J2 = """\
status = error
appender.file.type = Console
appender.file.name = out
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{ISO8601} %-5p [%t] %c{1}: %m%n
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = out
"""


def zookeeper_classpath(jars_dir: Path | None = None) -> str:
    """The ZooKeeper server classpath built from ``<pyspark>/jars`` (or ``jars_dir``)."""
    if jars_dir is None:
        import pyspark

        jars_dir = Path(pyspark.__file__).parent / "jars"
    jars: list[str] = []
    for pattern in _JAR_PATTERNS:
        matches = sorted(jars_dir.glob(pattern))
        if not matches:
            raise CoordinationError(f"cannot start embedded ZooKeeper: no {pattern} in {jars_dir}")
        jars.extend(str(m) for m in matches)
    return os.pathsep.join(jars)


def _four_letter_word(port: int, word: bytes, timeout_s: float = 1.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        s.sendall(word)
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
        return b"".join(chunks)


class EmbeddedZooKeeper:
    """One standalone ZooKeeper server process.

    ``tick_ms`` is small (500 ms) so sessions of 1-60 s can be negotiated and expire promptly
    in tests; production ensembles are configured elsewhere and only need ``hosts``.
    """

    def __init__(
        self,
        *,
        tick_ms: int = 500,
        min_session_timeout_ms: int = 1000,
        max_session_timeout_ms: int = 60_000,
        jars_dir: Path | None = None,
        log_level: str = "INFO",
        heap: str = "256m",
    ) -> None:
        self.tick_ms = tick_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.jars_dir = jars_dir
        self.log_level = log_level
        self.heap = heap
        self.data_dir: Path | None = None
        self._port: int | None = None
        self._proc: subprocess.Popen | None = None
        self._log_file: BinaryIO | None = None
        atexit.register(self._kill_quietly)

    @property
    def port(self) -> int:
        if self._port is None:
            raise CoordinationError("embedded ZooKeeper was never started: it has no port")
        return self._port

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise CoordinationError("embedded ZooKeeper is not running: it has no pid")
        return self._proc.pid

    @property
    def log_path(self) -> Path:
        if self.data_dir is None:
            raise CoordinationError("embedded ZooKeeper was never started: it has no log")
        return self.data_dir / "zookeeper.log"

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, data_dir: Path, port: int | None = None, timeout_s: float = 30.0) -> EmbeddedZooKeeper:
        """Start the server and return once it accepts sessions; a free port when ``port`` is None."""
        if self.is_running():
            raise CoordinationError(f"embedded ZooKeeper is already running at {self.hosts}")
        if port is not None:
            _refuse_taken(port)
        self.data_dir = Path(data_dir).resolve()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # A free port can be taken by someone else between probing and binding: try a few.
        attempts = 1 if port is not None else 3
        for attempt in range(attempts):
            self._port = port if port is not None else free_port()
            try:
                self._launch()
                self._wait_serving(timeout_s)
                return self
            except CoordinationError:
                self._kill_quietly()
                if attempt == attempts - 1 or "Address already in use" not in self.log_tail():
                    raise
        raise AssertionError("unreachable")

    def restart(self, timeout_s: float = 30.0) -> EmbeddedZooKeeper:
        """Stop (if running) and start again on the same port with the same data."""
        if self.data_dir is None or self._port is None:
            raise CoordinationError("embedded ZooKeeper was never started: nothing to restart")
        self.stop()
        return self.start(self.data_dir, self._port, timeout_s)

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM and wait (SIGKILL after ``timeout_s``). Resumes a SIGSTOPped server first."""
        if self._proc is None:
            return
        terminate(self._proc, "embedded ZooKeeper", timeout_s)
        self._close()

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig``; for SIGKILL/SIGTERM/SIGINT also wait for the exit. SIGSTOP/SIGCONT just signal."""
        if self._proc is None or self._proc.poll() is not None:
            raise CoordinationError("embedded ZooKeeper is not running: nothing to signal")
        self._proc.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
            self._proc.wait()
            self._close()

    def __enter__(self) -> EmbeddedZooKeeper:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _write_config(self) -> Path:
        assert self.data_dir is not None
        cfg = self.data_dir / "zoo.cfg"
        cfg.write_text(
            "\n".join(
                [
                    f"dataDir={self.data_dir}",
                    f"clientPort={self._port}",
                    "clientPortAddress=127.0.0.1",
                    f"tickTime={self.tick_ms}",
                    f"minSessionTimeout={self.min_session_timeout_ms}",
                    f"maxSessionTimeout={self.max_session_timeout_ms}",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr",
                    "maxClientCnxns=0",
                    "",
                ]
            )
        )
        (self.data_dir / "log4j2.properties").write_text(_LOG4J2.replace("{level}", self.log_level))
        return cfg

    def _launch(self) -> None:
        cfg = self._write_config()
        assert self.data_dir is not None
        command = [
            find_java(),
            f"-Xmx{self.heap}",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
            # Tests create many short-lived servers; the default 64 MB log preallocation is waste.
            "-Dzookeeper.preAllocSize=4096",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp",
            zookeeper_classpath(self.jars_dir),
            _MAIN_CLASS,
            str(cfg),
        ]
        log_file = self._log_file = open(self.log_path, "ab")
        log_file.write(f"--- {time.strftime('%Y-%m-%dT%H:%M:%S')} starting: {' '.join(command)}\n".encode())
        log_file.flush()
        self._proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            cwd=self.data_dir,
            preexec_fn=die_with_parent(),
        )
        log.info("embedded ZooKeeper pid %d starting at %s (data %s)", self._proc.pid, self.hosts, self.data_dir)

    def _wait_serving(self, timeout_s: float) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise CoordinationError(
                    f"embedded ZooKeeper exited with code {self._proc.returncode} while starting at "
                    f"{self.hosts}; log {self.log_path}:\n{self.log_tail()}"
                )
            # ``ruok`` says imok as soon as the process runs; ``srvr`` reports a mode only once the
            # server accepts sessions ("not currently serving requests" before that).
            try:
                if b"Mode: " in _four_letter_word(self.port, b"srvr"):
                    log.info("embedded ZooKeeper serving at %s", self.hosts)
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise CoordinationError(
            f"embedded ZooKeeper was not serving at {self.hosts} within {timeout_s:.0f}s; "
            f"log {self.log_path}:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 20) -> str:
        return log_tail(self.log_path, lines)

    def _close(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        self._proc = None

    def _kill_quietly(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._close()


def _refuse_taken(port: int, hint: str = "") -> None:
    """CoordinationError naming ``port`` when a process listens on it, on any interface."""
    if port in listening():
        raise CoordinationError(
            f"embedded ZooKeeper cannot listen at 127.0.0.1:{port}: another process listens there{hint}"
        )


def run_foreground(port: int, data_dir: Path) -> None:
    """``tiering zk``: serve until Ctrl-C or SIGTERM, then stop the server cleanly."""
    _refuse_taken(port, "; choose a free port with --port")
    server = EmbeddedZooKeeper()
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        server.start(data_dir, port)
        print(server.hosts, flush=True)
        while not stop.wait(0.5):
            if not server.is_running():
                raise CoordinationError(
                    f"embedded ZooKeeper at {server.hosts} exited unexpectedly; log {server.log_path}:\n"
                    f"{server.log_tail()}"
                )
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.stop()
