"""The reference store as a child process, for tests, benchmarks and the demo.

Failure modes: a store that never comes up (bad flags, port taken) must fail the caller with
the store's own log, not a 30 s hang and a bare timeout; a test that kills the store
(``kill(SIGKILL)``) must be able to bring the *same* store back (same port, same data dir)
to check what survived. Output goes to ``<data_dir>/store.log``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests

from tiering.errors import StoreUnavailableError
from tiering.kvstore.client import KvStoreClient
from tiering.ports import free_port

#: Starts on a free port tried before giving up: the port is free when picked, and another process
#: may bind it before the store does (tiering/ports.py).
PORT_ATTEMPTS = 3


class StoreProcess:
    """One ``python -m tiering.kvstore.server`` process (the flags of ``tiering kv-store serve``);
    ``start`` returns it once /v1/health answers."""

    def __init__(
        self,
        data_dir: Path,
        port: int,
        *,
        num_retained: int = 2,
        gc_interval_s: float = 30.0,
        snapshot_interval_s: float = 0.0,
        token: str | None = None,
        startup_timeout_s: float = 30.0,
        log_retention_s: float | None = None,
        max_body_bytes: int | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.token = token
        self.startup_timeout_s = startup_timeout_s
        self._args = [
            sys.executable,
            "-m",
            "tiering.kvstore.server",
            "--data-dir",
            str(self.data_dir),
            "--port",
            str(port),
            "--host",
            "127.0.0.1",
            "--num-retained",
            str(num_retained),
            "--gc-interval",
            str(gc_interval_s),
            "--snapshot-interval",
            str(snapshot_interval_s),
        ]
        if log_retention_s is not None:
            self._args += ["--log-retention", str(log_retention_s)]
        if max_body_bytes is not None:
            self._args += ["--max-body-bytes", str(max_body_bytes)]
        self._proc: subprocess.Popen | None = None

    @classmethod
    def start(
        cls,
        data_dir: Path,
        port: int | None = None,
        num_retained: int = 2,
        gc_interval_s: float = 30.0,
        snapshot_interval_s: float = 0.0,
        token: str | None = None,
        log_retention_s: float | None = None,
        max_body_bytes: int | None = None,
    ) -> StoreProcess:
        """A started store on ``port``; without one, on a free port, picked again (up to
        :data:`PORT_ATTEMPTS` times) when another process took it between the pick and the bind."""
        for attempt in range(1, PORT_ATTEMPTS + 1):
            store = cls(
                data_dir,
                port or free_port(),
                num_retained=num_retained,
                gc_interval_s=gc_interval_s,
                snapshot_interval_s=snapshot_interval_s,
                token=token,
                log_retention_s=log_retention_s,
                max_body_bytes=max_body_bytes,
            )
            try:
                store.launch()
                return store
            except StoreUnavailableError as e:
                if port is not None or attempt == PORT_ATTEMPTS or "address already in use" not in str(e):
                    raise
        raise AssertionError("unreachable")

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def launch(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env["TIERING_KVSTORE_TOKEN"] = self.token or ""  # the token stays off the command line
        with open(self.data_dir / "store.log", "ab") as out:
            self._proc = subprocess.Popen(self._args, stdout=out, stderr=subprocess.STDOUT, env=env)
        self._wait_healthy()

    @property
    def _process(self) -> subprocess.Popen:
        if self._proc is None:
            raise StoreUnavailableError(f"kv-store on port {self.port} was never started")
        return self._proc

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise StoreUnavailableError(
                    f"kv-store exited with code {self._process.returncode} "
                    f"while starting on port {self.port}:\n{self.log_tail()}"
                )
            try:
                if requests.get(f"{self.url}/v1/health", timeout=1).ok:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.05)
        self.kill()
        raise StoreUnavailableError(
            f"kv-store on port {self.port} not healthy after {self.startup_timeout_s}s:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 30) -> str:
        path = self.data_dir / "store.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else "(no log)"

    def client(self, timeout_s: float = 30.0) -> KvStoreClient:
        return KvStoreClient(self.url, token=self.token, timeout_s=timeout_s)

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig``; for SIGKILL/SIGTERM also reap the process."""
        if not self.alive():
            return
        self._process.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self._process.wait(timeout=30)

    def restart(self) -> None:
        """Kill (if running) and start again on the same port and data dir."""
        self.kill()
        self.launch()

    def stop(self, timeout_s: float = 15.0) -> None:
        if not self.alive():
            return
        process = self._process
        process.send_signal(signal.SIGCONT)  # a SIGSTOPped store could not handle SIGTERM
        process.terminate()
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)

    def __repr__(self) -> str:
        return f"StoreProcess(url={self.url!r}, data_dir={str(self.data_dir)!r}, pid={self.pid})"
