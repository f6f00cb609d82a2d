"""A real Apache Fluss cluster on loopback: its ZooKeeper, a coordinator and one tablet server.

Failure modes it guards against: a JVM that dies at startup (a port taken, a bad setting) is
reported with the tail of its log instead of a bare timeout, and a start whose port was taken
meanwhile is tried again on other ports; a "started" cluster is one whose tablet server the
cluster's metadata lists (a client can create tables on it), not one whose processes merely
exist; a crashed caller leaves no JVM behind (each dies with the process that started it, via
PR_SET_PDEATHSIG on Linux).

It is no mock: the processes run from the jars deploy/jars/fluss/pom.xml pins (the directory is
a parameter), and callers stop, SIGSTOP, SIGKILL and restart the tablet server. ZooKeeper is the
one shaded inside fluss-server. Each process keeps its config, data and log in a directory of
its own under the cluster's; the tablet server restarts on the same port with the same data.
Snapshots are taken every ``snapshot_interval`` and ``num_retained`` are kept per bucket (Fluss's
``kv.snapshot.interval`` and ``kv.snapshot.num-retained``); remote storage is a local directory.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tiering.children import die_with_parent, log_tail, terminate
from tiering.errors import FlussClusterError
from tiering.java import find_java
from tiering.ports import free_ports

__all__ = ["FlussCluster", "FlussProcess"]

log = logging.getLogger(__name__)

_ZOOKEEPER = "org.apache.fluss.shaded.zookeeper3.org.apache.zookeeper.server.quorum.QuorumPeerMain"
_COORDINATOR = "org.apache.fluss.server.coordinator.CoordinatorServer"
_TABLET = "org.apache.fluss.server.tablet.TabletServer"
#: the jars a server process needs: fluss-server is shaded (ZooKeeper, Netty, RocksDB inside);
#: beside it only slf4j and its log4j 2 backend
_SERVER_JARS = (
    "fluss-server-*.jar",
    "slf4j-api-*.jar",
    "log4j-api-*.jar",
    "log4j-core-*.jar",
    "log4j-slf4j-impl-*.jar",
)
#: small-machine JVM settings; Fluss's Arrow memory needs java.nio opened
_JVM = ("-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "--add-opens=java.base/java.nio=ALL-UNNAMED")
_LOG4J2 = """\
status = error
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = %d{ISO8601} %-5p [%t] %c{1}: %m%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
"""
_PORT_TAKEN = "Address already in use"
#: where a tablet server registers itself (Fluss's ZooKeeper root, then its id): an ephemeral node
_TABLET_REGISTRATION = "/fluss/tabletservers/ids/0"


def server_classpath(jars_dir: Path) -> str:
    """The classpath of a Fluss server process from ``jars_dir``; names the jar it lacks."""
    jars: list[str] = []
    for pattern in _SERVER_JARS:
        matches = sorted(jars_dir.glob(pattern))
        if not matches:
            raise FlussClusterError(
                f"cannot start Fluss: no {pattern} in {jars_dir} (scripts/setup_fluss.sh fetches it)"
            )
        jars.extend(str(m) for m in matches)
    return ":".join(jars)


class FlussProcess:
    """One server JVM of the cluster: its directory holds its config, data and ``process.log``."""

    def __init__(self, name: str, directory: Path, command: Sequence[str]) -> None:
        self.name = name
        self.directory = directory
        self.command = list(command)
        self._proc: subprocess.Popen | None = None
        self._log: BinaryIO | None = None

    @property
    def log_path(self) -> Path:
        return self.directory / "process.log"

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise FlussClusterError(f"Fluss {self.name} is not running: it has no pid")
        return self._proc.pid

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def launch(self) -> None:
        log_file = self._log = open(self.log_path, "ab")
        log_file.write(f"--- {time.strftime('%Y-%m-%dT%H:%M:%S')} starting: {' '.join(self.command)}\n".encode())
        log_file.flush()
        self._proc = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=self.directory,
            preexec_fn=die_with_parent(),
        )
        log.info("Fluss %s pid %d starting (%s)", self.name, self._proc.pid, self.directory)

    def check_alive(self) -> None:
        """Raise naming the exit code and the log's tail when the process has exited."""
        if self._proc is not None and self._proc.poll() is not None:
            raise FlussClusterError(
                f"Fluss {self.name} exited with code {self._proc.returncode}; log {self.log_path}:\n{self.log_tail()}"
            )

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM and wait (SIGKILL after ``timeout_s``); a SIGSTOPped process is resumed first."""
        if self._proc is None:
            return
        terminate(self._proc, f"Fluss {self.name}", timeout_s)
        self._close()

    def signal(self, sig: int) -> None:
        """Send ``sig``; SIGKILL, SIGTERM and SIGINT also wait for the exit. SIGSTOP/SIGCONT only signal."""
        if not self.is_running():
            raise FlussClusterError(f"Fluss {self.name} is not running: nothing to signal")
        assert self._proc is not None
        self._proc.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
            self._proc.wait()
            self._close()

    def log_tail(self, lines: int = 20) -> str:
        return log_tail(self.log_path, lines)

    def _close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
        self._proc = None


@dataclass(frozen=True)
class _Ports:
    zookeeper: int
    coordinator: int
    tablet: int


class FlussCluster:
    """ZooKeeper, a CoordinatorServer and one TabletServer (id 0), each its own JVM.

    ``jvm_options`` are added to every JVM's command line (the tests' temporary directory, say).
    """

    def __init__(
        self,
        jars_dir: Path,
        *,
        buckets: int = 3,
        snapshot_interval: str = "2s",
        num_retained: int = 2,
        jvm_options: Sequence[str] = (),
    ) -> None:
        self.jars_dir = Path(jars_dir).resolve()
        self.buckets = buckets
        self.snapshot_interval = snapshot_interval
        self.num_retained = num_retained
        self.jvm_options = tuple(jvm_options)
        self.directory: Path | None = None
        self._ports: _Ports | None = None
        self.zookeeper: FlussProcess | None = None
        self.coordinator: FlussProcess | None = None
        self.tablet: FlussProcess | None = None
        atexit.register(self._kill_quietly)

    @property
    def bootstrap_servers(self) -> str:
        """The client's ``bootstrap.servers``: the coordinator's listener."""
        return f"127.0.0.1:{self._started_ports().coordinator}"

    @property
    def zookeeper_address(self) -> str:
        return f"127.0.0.1:{self._started_ports().zookeeper}"

    @property
    def remote_dir(self) -> Path:
        """Fluss's ``remote.data.dir``: where the KV snapshots' files are kept."""
        return self._started_directory() / "remote"

    def start(self, directory: Path, timeout_s: float = 60.0) -> FlussCluster:
        """Start the three processes in ``directory`` and return once the tablet server is listed."""
        self.directory = Path(directory).resolve()
        classpath = server_classpath(self.jars_dir)
        attempts = 3  # a free port can be taken by someone else between probing and binding
        for attempt in range(attempts):
            self._ports = _Ports(*free_ports(3))
            try:
                self.zookeeper = self._process("zookeeper", _ZOOKEEPER, classpath, self._write_zoo_properties)
                self.zookeeper.launch()
                self._wait_accepting(self.zookeeper, self._ports.zookeeper, timeout_s)
                self.coordinator = self._process("coordinator", _COORDINATOR, classpath, self._write_server_yaml)
                self.coordinator.launch()
                self.tablet = self._process("tablet", _TABLET, classpath, self._write_server_yaml)
                self.tablet.launch()
                self.wait_tablet_listed(timeout_s)
                return self
            except FlussClusterError:
                taken = any(_PORT_TAKEN in p.log_tail(200) for p in self._processes())
                self.stop()
                if attempt == attempts - 1 or not taken:
                    raise
        raise AssertionError("unreachable")

    def stop(self) -> None:
        """Stop the tablet server, the coordinator, then ZooKeeper (SIGTERM, then SIGKILL)."""
        for process in reversed(self._processes()):
            process.stop()

    def restart_tablet(self, timeout_s: float = 60.0) -> None:
        """Stop the tablet server (if running) and start it again: same id, port and data.

        Returns once the new process registered itself: a SIGKILLed server's registration
        outlives it until its ZooKeeper session expires, so being listed proves nothing then.
        """
        tablet = self._tablet()
        before = self.registration()
        tablet.stop()
        tablet.launch()
        self.wait_tablet_listed(timeout_s, replacing=before)

    def signal_tablet(self, sig: int) -> None:
        """SIGSTOP, SIGCONT or SIGKILL the tablet server (:meth:`FlussProcess.signal`)."""
        self._tablet().signal(sig)

    def wait_tablet_listed(self, timeout_s: float = 60.0, replacing: int | None = None) -> None:
        """Poll until tablet server 0 is registered in ZooKeeper by a session other than
        ``replacing`` and the cluster's metadata lists it; raise naming a dead process."""
        from kazoo.client import KazooClient

        deadline = time.monotonic() + timeout_s
        last = "no answer yet"
        zookeeper = KazooClient(hosts=self.zookeeper_address, timeout=10.0)
        zookeeper.start(timeout=timeout_s)
        try:
            while time.monotonic() < deadline:
                for process in self._processes():
                    process.check_alive()
                owner = self._registration(zookeeper)
                if owner is None or owner == replacing:
                    last = "tablet server 0 not registered in ZooKeeper" + (" again" if replacing else "")
                else:
                    last = asyncio.run(self._listing())
                    if not last:
                        log.info("Fluss cluster serving at %s", self.bootstrap_servers)
                        return
                time.sleep(0.2)
        finally:
            zookeeper.stop()
            zookeeper.close()
        raise FlussClusterError(
            f"Fluss at {self.bootstrap_servers} did not list tablet server 0 within {timeout_s:.0f}s ({last}); "
            f"tablet log {self._tablet().log_path}:\n{self._tablet().log_tail()}"
        )

    def registration(self) -> int | None:
        """The ZooKeeper session that registered tablet server 0, None when none has."""
        from kazoo.client import KazooClient

        zookeeper = KazooClient(hosts=self.zookeeper_address, timeout=10.0)
        zookeeper.start(timeout=10.0)
        try:
            return self._registration(zookeeper)
        finally:
            zookeeper.stop()
            zookeeper.close()

    @staticmethod
    def _registration(zookeeper) -> int | None:
        stat = zookeeper.exists(_TABLET_REGISTRATION)
        return None if stat is None else stat.ephemeralOwner

    @staticmethod
    def _wait_accepting(process: FlussProcess, port: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            process.check_alive()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
                return
            except OSError:
                time.sleep(0.1)
        raise FlussClusterError(
            f"Fluss {process.name} did not accept connections on 127.0.0.1:{port} within {timeout_s:.0f}s; "
            f"log {process.log_path}:\n{process.log_tail()}"
        )

    async def _listing(self) -> str:
        """Why the cluster's metadata does not list tablet server 0 yet; empty once it does."""
        import fluss

        try:
            connection = await fluss.FlussConnection.create(fluss.Config({"bootstrap.servers": self.bootstrap_servers}))
            try:
                nodes = await connection.get_admin().get_server_nodes()
            finally:
                await connection.close()
        except fluss.FlussError as e:
            return str(e)
        if any(node.server_type == "TabletServer" and node.id == 0 for node in nodes):
            return ""
        return f"servers listed: {[(node.server_type, node.id) for node in nodes]}"

    def _process(
        self, name: str, main_class: str, classpath: str, write_config: Callable[[str, Path], list[str]]
    ) -> FlussProcess:
        """A process of the cluster: its directory, logging config, and command line (the arguments
        ``write_config`` returns after writing its config file)."""
        directory = self._started_directory() / name
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "log4j2.properties").write_text(_LOG4J2)
        command = [
            find_java(),
            *_JVM,
            *self.jvm_options,
            f"-Dlog4j.configurationFile={directory / 'log4j2.properties'}",
            "-cp",
            classpath,
            main_class,
            *write_config(name, directory),
        ]
        return FlussProcess(name, directory, command)

    def _write_zoo_properties(self, name: str, directory: Path) -> list[str]:
        ports = self._started_ports()
        properties = directory / "zoo.properties"
        properties.write_text(
            f"dataDir={directory / 'data'}\nclientPort={ports.zookeeper}\nclientPortAddress=127.0.0.1\n"
            "tickTime=500\nadmin.enableServer=false\nmaxClientCnxns=0\n"
        )
        return [str(properties)]

    def _write_server_yaml(self, name: str, directory: Path) -> list[str]:
        ports = self._started_ports()
        port = ports.tablet if name == "tablet" else ports.coordinator
        settings = {
            "zookeeper.address": self.zookeeper_address,
            "bind.listeners": f"FLUSS://127.0.0.1:{port}",
            "data.dir": str(directory / "data"),
            "remote.data.dir": str(self.remote_dir),
            "default.bucket.number": str(self.buckets),
            "default.replication.factor": "1",
            "kv.snapshot.interval": self.snapshot_interval,
            "kv.snapshot.num-retained": str(self.num_retained),
            "netty.server.num-network-threads": "1",
            "netty.server.num-worker-threads": "2",
            "server.io-pool.size": "2",
        }
        if name == "tablet":
            settings["tablet-server.id"] = "0"
        (directory / "server.yaml").write_text("".join(f"{key}: {value}\n" for key, value in settings.items()))
        return ["--configDir", str(directory)]

    def _processes(self) -> list[FlussProcess]:
        return [p for p in (self.zookeeper, self.coordinator, self.tablet) if p is not None]

    def _tablet(self) -> FlussProcess:
        if self.tablet is None:
            raise FlussClusterError("the Fluss cluster was never started: it has no tablet server")
        return self.tablet

    def _started_ports(self) -> _Ports:
        if self._ports is None:
            raise FlussClusterError("the Fluss cluster was never started: it has no ports")
        return self._ports

    def _started_directory(self) -> Path:
        if self.directory is None:
            raise FlussClusterError("the Fluss cluster was never started: it has no directory")
        return self.directory

    def _kill_quietly(self) -> None:
        for process in self._processes():
            if process.is_running():
                process.signal(signal.SIGKILL)
