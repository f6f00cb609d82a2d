"""A job running while the test writes to the store and breaks the services around it.

Failure mode these helpers exist for: a test that "passes" because the job quietly stopped
making progress, or because its writer quietly died. :func:`wait_caught_up` requires the lake
to reach the store's log end of every bucket (read from the Delta commits, not from the job);
:class:`Writers` pauses writes around a kill so the oracle never disagrees with the store about
an unanswered write, and hands a failed write to the test when stopped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from tests.support.oracle import TableOracle
from tests.support.waiting import wait_until
from tiering.delta_log.lake import Lake
from tiering.enumerator.positions import LakePosition
from tiering.kvstore.client import KvStoreClient
from tiering.kvstore.reference import bucket_log


class Writers:
    """A thread churning every table (``batch`` keys each) every ``every_s`` until stopped;
    :meth:`paused` holds it between batches, :meth:`stop` raises what made it fail."""

    def __init__(self, tables: list[TableOracle], key_space: int = 400, batch: int = 20, every_s: float = 0.1) -> None:
        self.tables = tables
        self.batches = 0
        self.error: BaseException | None = None
        self._key_space, self._batch, self._every_s = key_space, batch, every_s
        self._stop = threading.Event()
        self._idle = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="store-writers", daemon=True)

    def start(self) -> Writers:
        self._thread.start()
        return self

    def __enter__(self) -> Writers:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                with self._idle:
                    for t in list(self.tables):
                        t.churn(self._batch, key_space=self._key_space)
                self.batches += 1
                self._stop.wait(self._every_s)
        except BaseException as e:  # reported by stop() in the test's thread
            self.error = e

    def paused(self):
        return self._idle

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        if self.error is not None:
            raise AssertionError(f"the store writers failed after {self.batches} batches: {self.error!r}")


class Rounds:
    """Collects round outcomes (the job's ``on_round``, called with a ``RoundOutcome``): counts
    and per-table failures."""

    def __init__(self) -> None:
        self.count = 0
        self.failures: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, outcome) -> None:
        with self._lock:
            self.count += 1
            self.failures.extend(f"round {outcome.round_id} {t}: {e}" for t, e in outcome.failed.items())

    def wait_for(self, more: int, job: dict | None = None, timeout_s: float = 120) -> None:
        """Wait for ``more`` rounds; fail at once when the job (an :func:`in_thread` box) ended."""
        target = self.count + more

        def done() -> bool:
            if job is not None and job:
                raise AssertionError(f"the job ended while waiting for rounds: {job}")
            return self.count >= target

        wait_until(done, f"{more} more rounds", timeout_s=timeout_s, interval_s=0.1)


def caught_up(client: KvStoreClient, lake_root: str | Lake, tables: list[TableOracle]) -> bool:
    """Every bucket of ``tables`` at its log end in the lake (a :class:`Lake`, any storage, or a local root)."""
    lake = lake_root if isinstance(lake_root, Lake) else Lake.at(str(lake_root))
    for t in tables:
        position = lake.position(t.name, t.info.table_id)
        if (position or LakePosition(t.info.table_id)).lag(map(bucket_log, client.log_info(t.name).buckets)) > 0:
            return False
    return True


def wait_caught_up(client: KvStoreClient, lake_root: str, tables: list[TableOracle], timeout_s: float = 120) -> None:
    wait_until(lambda: caught_up(client, lake_root, tables), "the lake to reach every log end", timeout_s=timeout_s)


def wait_lake_commits(lake_root: str, table: str, more: int, timeout_s: float = 180) -> None:
    """Wait until ``table`` has ``more`` new Delta commits: rounds land while writes go on."""

    def version() -> int:
        try:
            return DeltaTable(f"{lake_root}/{table}").version()
        except TableNotFoundError:
            return -1

    target = version() + more
    wait_until(lambda: version() >= target, f"{more} more commits of {table}", timeout_s=timeout_s)


def in_thread(target: Callable[[], object]) -> tuple[threading.Thread, dict]:
    """Run ``target`` on a daemon thread; its result or exception lands in the returned dict."""
    box: dict = {}

    def run() -> None:
        try:
            box["result"] = target()
        except BaseException as e:  # handed to the test thread
            box["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box
