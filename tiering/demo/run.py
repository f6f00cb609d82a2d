"""`tiering demo`: the whole service on one machine, then proof that the lake equals the store.

Failure modes it is built to expose rather than hide: a row lost, duplicated or stale in the
lake (the final check compares every row of every table with the store's own state at the same
offsets, and the exit code says so), a job that falls behind, a lease that keeps pinning
snapshots (both on the live view). The job runs through the same leader loop as `tiering run`.

Phases: start ZooKeeper and the store -> create tables, load them, snapshot -> start Spark
and lead the job -> write inserts, updates and deletes while tiering runs -> stop writing,
wait until the lake reaches every bucket's log end -> stop the job -> compare row by row.
"""

from __future__ import annotations

import logging
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from tiering.conf.loader import load_config
from tiering.conf.model import TieringConfig
from tiering.context import store_client
from tiering.delta_log.lake import Lake
from tiering.demo.live import Progress
from tiering.demo.scenario import Writer, demo_tables
from tiering.demo.services import SPARK_LOG4J, DemoServices, log_to_file, wait_interruptibly
from tiering.errors import TieringError
from tiering.kvstore.models import TableInfo
from tiering.objectstore.embedded_s3 import EmbeddedS3
from tiering.ops.verify import TableCheck, check_table
from tiering.state.checkpoint_store import checkpoint_of
from tiering.state.lease_file import read_lease_id

__all__ = ["DemoOptions", "DemoSession", "JobThread", "run_demo", "demo_config", "demo_session", "render_checks", "JOB"]

log = logging.getLogger(__name__)

JOB = "kv-tiering-demo"


@dataclass(frozen=True)
class DemoOptions:
    duration_s: float = 45.0
    tables: int = 3
    data_dir: Path | None = None
    keep: bool = False
    lake: str = "local"  # or "s3": an embedded S3 server holds the lake
    interval_s: float = 2.0
    initial_rows: int = 500
    catch_up_timeout_s: float = 120.0
    store: str = "http"  # or "fluss": a Fluss cluster of the demo's own


def demo_config(
    data_dir: Path,
    zk_hosts: str,
    interval_s: float,
    *,
    kvstore: dict[str, Any],
    s3: EmbeddedS3 | None = None,
    extra: dict[str, Any] | None = None,
) -> TieringConfig:
    """The demo job's config: ``kvstore`` as ``[kvstore]``'s keys, ``extra`` as dotted overrides."""
    log4j = data_dir / "log4j2.properties"
    log4j.write_text(SPARK_LOG4J.format(path=data_dir / "spark.log"))
    return load_config(
        None,
        {},
        {
            "job.name": JOB,
            "job.checkpoint": str(data_dir / "checkpoint"),
            **{f"kvstore.{key}": value for key, value in kvstore.items()},
            "zookeeper.hosts": zk_hosts,
            "lake.root": f"{s3.root}/lake" if s3 is not None else str(data_dir / "lake"),
            "lake.storage": s3.storage_options() if s3 is not None else {},
            "trigger.interval_s": interval_s,
            "lease.duration_s": 60.0,
            "spark.spark.master": "local[2]",
            "spark.spark.ui.enabled": "false",
            "spark.spark.ui.showConsoleProgress": "false",
            "spark.spark.sql.shuffle.partitions": "4",
            "spark.spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={log4j}",
            **(extra or {}),
        },
    )


class JobThread(threading.Thread):
    """``run_as_leader`` until ``stop_event`` is set; the error, if any, is kept for the demo."""

    def __init__(self, config: TieringConfig, progress: Progress) -> None:
        super().__init__(name="demo-tiering", daemon=True)
        self.config = config
        self.progress = progress
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        from tiering.job import run_as_leader

        try:
            run_as_leader(self.config, stop=self.stop_event, listeners=[self.progress.on_round])
        except BaseException as e:  # noqa: BLE001 - reported by the demo, which then fails
            self.error = e
            log.exception("demo tiering job failed")

    def stop(self) -> None:
        if self.is_alive():
            self.stop_event.set()
            self.join(timeout=60)


class DemoSession:
    """One demo's data directory and processes. Whatever is stopped on the way out is registered
    with :meth:`on_stop`; ``ok`` (the verdict) decides whether the data directory is removed."""

    def __init__(self, data_dir: Path, services: DemoServices, console: Console) -> None:
        self.data_dir, self.services, self.console = data_dir, services, console
        self.ok = False
        self._stops: list[Callable[[], None]] = []

    def on_stop(self, stop: Callable[[], None]) -> None:
        self._stops.append(stop)

    def tier(self, job: JobThread, what: str) -> None:
        """Run ``job`` (an availableNow config) to its end; Ctrl-C interrupts the wait. Its error raised."""
        self.console.print(f"demo: tiering {what}")
        self.on_stop(job.stop)
        job.start()
        wait_interruptibly(job)
        if job.error is not None:
            raise TieringError(f"demo: tiering {what} failed: {job.error}") from job.error

    def stop(self) -> None:
        for stop in self._stops:
            stop()
        self.services.stop()


@contextmanager
def demo_session(options: DemoOptions, console: Console) -> Iterator[DemoSession]:
    """A data directory (kept when the run was not ``ok``) and logging to it; on the way out,
    on every path (SIGTERM and Ctrl-C included, a second Ctrl-C ignored), everything stopped."""
    created = options.data_dir is None
    data_dir = (
        Path(tempfile.mkdtemp(prefix="kv-tiering-demo-"))
        if options.data_dir is None
        else Path(options.data_dir).resolve()
    )
    data_dir.mkdir(parents=True, exist_ok=True)
    log_to_file(data_dir / "demo.log")
    previous_term = signal.signal(signal.SIGTERM, _interrupt)
    session = DemoSession(data_dir, DemoServices(data_dir, console), console)
    try:
        console.print(f"demo: data in {data_dir} (logs: demo.log, spark.log)")
        yield session
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not abandon the cleanup
        try:
            session.stop()
        finally:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, previous_term)
        if session.ok and created and not options.keep:
            shutil.rmtree(data_dir, ignore_errors=True)
        elif not session.ok:
            console.print(f"demo: data and logs kept in {data_dir}")


def run_demo(options: DemoOptions, console: Console | None = None) -> bool:
    """Run the demo; True when every table of the lake equals the store. Cleans up on every path."""
    console = console or Console()
    with demo_session(options, console) as session:
        services = session.services
        services.start_zookeeper()
        store = services.start_store()
        client = store.client()
        tables = demo_tables(options.tables)
        infos = [client.create_table(kind.spec(name[len(kind.name) :])) for name, kind in tables]
        writer = Writer(client, tables)
        session.on_stop(writer.stop)
        writer.load(options.initial_rows)
        for info in infos:
            client.take_snapshots(info.name)
        console.print(f"demo: {len(infos)} tables loaded: {', '.join(i.name for i in infos)}; starting Spark")

        s3 = services.start_s3() if options.lake == "s3" else None
        config = demo_config(session.data_dir, services.zk.hosts, options.interval_s, kvstore={"url": store.url}, s3=s3)
        services.start_spark(config)
        progress = Progress()
        job = JobThread(config, progress)
        session.on_stop(job.stop)
        job.start()
        watch = _Watch(progress, writer, job, config, infos, session.data_dir)
        with Live(
            progress.render(writer, 0, session.data_dir), console=console, refresh_per_second=2, transient=False
        ) as live:
            progress.phase = "tiering while writing"
            writer.start()
            watch.until(live, lambda up: watch.elapsed_s >= options.duration_s)
            writer.stop()
            progress.phase = "writes stopped; catching up"
            deadline = time.monotonic() + options.catch_up_timeout_s
            caught_up = watch.until(live, lambda up: up or time.monotonic() >= deadline)
            progress.phase = "caught up" if caught_up else "did not catch up"
            live.update(progress.render(writer, watch.elapsed_s, session.data_dir))
        if not console.is_terminal:
            console.line()  # off a terminal, rich's Live ends its last render without a newline
        job.stop()
        if writer.error is not None or job.error is not None:
            console.print(f"demo: FAILED: {writer.error or job.error}")
            return False
        if not caught_up:
            console.print(
                f"demo: FAILED: the lake did not reach the store's log end within {options.catch_up_timeout_s:.0f}s"
            )
        checks = [check_table(client, Lake.of(config.lake), info) for info in infos]
        console.print(render_checks(checks))
        session.ok = caught_up and all(c.equal for c in checks)
        console.print(
            "demo: lake == store for every table" if session.ok else "demo: FAILED: the lake differs from the store"
        )
    return session.ok


class _Watch:
    """Refreshes the live view once a second until a condition holds or something failed."""

    def __init__(
        self,
        progress: Progress,
        writer: Writer,
        job: JobThread,
        config: TieringConfig,
        infos: list[TableInfo],
        data_dir: Path,
    ) -> None:
        self.progress, self.writer, self.job, self.config = progress, writer, job, config
        self.infos, self.data_dir = infos, data_dir
        self.client = store_client(config.kvstore)
        self.lake = Lake.of(config.lake)
        self.started = time.monotonic()

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def until(self, live: Live, done: Callable[[bool], bool]) -> bool:
        """Poll until ``done(caught_up)``; returns whether the lake had caught up at the end."""
        while True:
            if self.writer.error is not None or self.job.error is not None:
                return False
            lease_id = read_lease_id(checkpoint_of(self.config))
            caught_up = self.progress.poll(self.client, self.lake, self.infos, lease_id)
            live.update(self.progress.render(self.writer, self.elapsed_s, self.data_dir))
            if done(caught_up):
                return caught_up
            time.sleep(1.0)


def render_checks(checks: list[TableCheck], store: str = "store") -> Table:
    table = Table(
        "table",
        f"{store} rows",
        "lake rows",
        "missing",
        "extra",
        "differ",
        "offsets",
        "result",
        title=f"lake vs {store}, row by row",
    )
    for c in checks:
        table.add_row(
            c.table,
            str(c.store_rows),
            str(c.lake_rows),
            str(c.missing),
            str(c.extra),
            str(c.different),
            "equal" if c.offsets_match else "DIFFER",
            "[green]EQUAL[/]" if c.equal else "[red]DIFFERENT[/]",
        )
    return table


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
