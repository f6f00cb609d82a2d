"""`tiering demo`: the whole service on one machine, then proof that the lake equals the store.

Failure modes it is built to expose rather than hide: a row lost, duplicated or stale in the
lake (the final check compares every row of every table with the store's own state at the
same offsets, and the exit code says so); a job that falls behind (live lag per table); a
lease that keeps pinning snapshots (live lease holdings). It must also never leave processes
behind: ZooKeeper, the store and Spark are stopped on success, on failure, on Ctrl-C and on
SIGTERM (ZooKeeper additionally dies with this process).

Phases: start ZooKeeper and the store -> create tables, load them, snapshot -> start Spark
and lead the job -> write inserts, updates and deletes while tiering runs -> stop writing,
wait until the lake reaches every bucket's log end -> stop the job -> compare row by row.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from tiering import observability
from tiering.conf.loader import load_config
from tiering.conf.model import TieringConfig
from tiering.coord.embedded import EmbeddedZooKeeper
from tiering.kvstore.client import KvStoreClient
from tiering.kvstore.models import TableInfo, TableSpec
from tiering.kvstore.server.process import StoreProcess
from tiering.lake.committer import RoundOutcome
from tiering.lake.layout import SYSTEM_COLUMNS, table_path
from tiering.lake.positions import read_position

__all__ = ["DemoOptions", "run_demo", "DEMO_TABLES"]

log = logging.getLogger(__name__)

JOB = "kv-tiering-demo"
_SPARK_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{ISO8601}} %p %c{{1}}: %m%n%ex
"""


@dataclass(frozen=True)
class DemoOptions:
    duration_s: float = 45.0
    tables: int = 3
    data_dir: Path | None = None
    keep: bool = False
    interval_s: float = 2.0
    initial_rows: int = 500
    catch_up_timeout_s: float = 120.0


# --- realistic tables ----------------------------------------------------------------------


@dataclass(frozen=True)
class DemoTable:
    """A table's schema and how to make its key ``i`` and a fresh version of its row."""

    name: str
    schema: list[dict]
    primary_key: list[str]
    row: Callable[[int, random.Random, dt.datetime], dict]
    num_buckets: int = 4

    def spec(self, suffix: str = "") -> TableSpec:
        return TableSpec.model_validate(
            {"name": self.name + suffix, "schema": self.schema, "primary_key": self.primary_key, "num_buckets": self.num_buckets}
        )


def _col(name: str, type_: str) -> dict:
    return {"name": name, "type": type_}


def _money(rng: random.Random) -> str:
    return str(Decimal(rng.randrange(100, 500_000)) / 100)


def _iso(t: dt.datetime) -> str:
    return t.isoformat()


_STATUSES = ("NEW", "PAID", "SHIPPED", "DELIVERED", "CANCELLED")
_COUNTRIES = ("DE", "FR", "US", "BR", "JP", "IN", "NG", "SE")
_WAREHOUSES = ("ams", "fra", "iad", "sin")

DEMO_TABLES: tuple[DemoTable, ...] = (
    DemoTable(
        "orders",
        [_col("order_id", "bigint"), _col("customer_id", "bigint"), _col("status", "string"),
         _col("amount", "decimal(12,2)"), _col("updated_at", "timestamp")],
        ["order_id"],
        lambda i, rng, now: {"order_id": i, "customer_id": rng.randrange(10_000), "status": rng.choice(_STATUSES),
                             "amount": _money(rng), "updated_at": _iso(now)},
    ),
    DemoTable(
        "customers",
        [_col("customer_id", "bigint"), _col("name", "string"), _col("email", "string"), _col("country", "string"),
         _col("signup_date", "date"), _col("vip", "boolean")],
        ["customer_id"],
        lambda i, rng, now: {"customer_id": i, "name": f"customer {i}", "email": f"c{i}.{rng.randrange(99)}@example.com",
                             "country": rng.choice(_COUNTRIES),
                             "signup_date": (now.date() - dt.timedelta(days=rng.randrange(2000))).isoformat(),
                             "vip": rng.random() < 0.1},
        num_buckets=3,
    ),
    DemoTable(
        "inventory",
        [_col("warehouse", "string"), _col("sku", "string"), _col("qty", "int"), _col("price", "double"),
         _col("updated_at", "timestamp")],
        ["warehouse", "sku"],
        lambda i, rng, now: {"warehouse": _WAREHOUSES[i % 4], "sku": f"SKU-{i // 4:06d}", "qty": rng.randrange(500),
                             "price": round(rng.uniform(1, 300), 2), "updated_at": _iso(now)},
        num_buckets=2,
    ),
    DemoTable(
        "payments",
        [_col("payment_id", "bigint"), _col("order_id", "bigint"), _col("method", "string"),
         _col("amount", "decimal(12,2)"), _col("paid_at", "timestamp")],
        ["payment_id"],
        lambda i, rng, now: {"payment_id": i, "order_id": rng.randrange(100_000), "method": rng.choice(("card", "sepa", "pix")),
                             "amount": _money(rng), "paid_at": _iso(now)},
    ),
)


def _tables(n: int) -> list[tuple[str, DemoTable]]:
    """``n`` (name, kind) pairs: the kinds in order, then again with a numeric suffix."""
    out = []
    for i in range(n):
        kind = DEMO_TABLES[i % len(DEMO_TABLES)]
        suffix = "" if i < len(DEMO_TABLES) else f"_{i // len(DEMO_TABLES) + 1}"
        out.append((kind.name + suffix, kind))
    return out


def _key(kind: DemoTable, row: dict) -> dict:
    return {k: row[k] for k in kind.primary_key}


# --- the writer ----------------------------------------------------------------------------


@dataclass
class WriteCounts:
    inserts: int = 0
    updates: int = 0
    deletes: int = 0


class Writer:
    """Writes a realistic mix to every table until stopped: new keys, updates, deletes."""

    def __init__(self, client: KvStoreClient, tables: list[tuple[str, DemoTable]], seed: int = 7) -> None:
        self.client = client
        self.tables = tables
        self.rng = random.Random(seed)
        self.next_id = {name: 0 for name, _ in tables}
        self.live: dict[str, list[int]] = {name: [] for name, _ in tables}
        self.counts = {name: WriteCounts() for name, _ in tables}
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="demo-writer", daemon=True)

    def load(self, rows: int) -> None:
        for name, kind in self.tables:
            self._insert(name, kind, rows)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def _loop(self) -> None:
        try:
            while not self._stop.wait(0.2):
                for name, kind in self.tables:
                    self._tick(name, kind)
        except BaseException as e:  # noqa: BLE001 - reported by the demo, which then fails
            self.error = e
            log.exception("demo writer failed")

    def _tick(self, name: str, kind: DemoTable) -> None:
        self._insert(name, kind, self.rng.randrange(10, 30))
        live = self.live[name]
        now = dt.datetime.now(dt.timezone.utc)
        updated = self.rng.sample(live, min(len(live), self.rng.randrange(5, 15)))
        if updated:
            self.client.upsert(name, [kind.row(i, self.rng, now) for i in updated])
            self.counts[name].updates += len(updated)
        deleted = self.rng.sample(live, min(len(live), self.rng.randrange(2, 8)))
        if deleted:
            self.client.delete(name, [_key(kind, kind.row(i, self.rng, now)) for i in deleted])
            gone = set(deleted)
            self.live[name] = [i for i in live if i not in gone]
            self.counts[name].deletes += len(deleted)

    def _insert(self, name: str, kind: DemoTable, n: int) -> None:
        start = self.next_id[name]
        now = dt.datetime.now(dt.timezone.utc)
        self.client.upsert(name, [kind.row(i, self.rng, now) for i in range(start, start + n)])
        self.next_id[name] = start + n
        self.live[name].extend(range(start, start + n))
        self.counts[name].inserts += n


# --- progress ------------------------------------------------------------------------------


@dataclass
class TableProgress:
    log_end: int = 0
    lake_offset: int = 0
    lag: int = 0
    leased: int = 0
    rounds: int = 0
    failures: int = 0


@dataclass
class Progress:
    """What the display shows; rounds are counted by the job's hook, the rest is polled."""

    phase: str = "starting"
    epoch: int | None = None
    last_round: int | None = None
    tables: dict[str, TableProgress] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_round(self, outcome: RoundOutcome) -> None:
        with self.lock:
            self.last_round = outcome.round_id
            for table in outcome.committed:
                self.tables.setdefault(table, TableProgress()).rounds += 1
            for table in outcome.failed:
                self.tables.setdefault(table, TableProgress()).failures += 1

    def poll(self, client: KvStoreClient, lake_root: str, infos: list[TableInfo], lease_id: str | None) -> bool:
        """Refresh store and lake numbers; True when every table's lake reached its log end."""
        lease = next((lease for lease in client.list_leases() if lease.lease_id == lease_id), None)
        held = Counter(ref.table_id for ref in lease.snapshots) if lease is not None else Counter()
        caught_up = True
        for info in infos:
            ends = {b.bucket: b.log_end_offset for b in client.log_info(info.name).buckets}
            position = read_position(lake_root, info.name)
            reached = position.buckets if position is not None and position.table_id == info.table_id else {}
            lag = sum(max(0, end - reached.get(b, 0)) for b, end in ends.items())
            caught_up = caught_up and lag == 0
            with self.lock:
                p = self.tables.setdefault(info.name, TableProgress())
                p.log_end, p.lake_offset, p.lag, p.leased = sum(ends.values()), sum(reached.values()), lag, held[info.table_id]
        return caught_up

    def render(self, writer: Writer, elapsed_s: float, data_dir: Path) -> Group:
        with self.lock:
            head = (f"[bold]{self.phase}[/]  {elapsed_s:5.0f}s  epoch {self.epoch or '-'}  "
                    f"round {'-' if self.last_round is None else self.last_round}  data {data_dir}")
            table = Table("table", "rows", "+ins", "~upd", "-del", "log end", "lake", "lag", "leased", "rounds", "failed",
                          caption="log end / lake: changelog offsets summed over buckets; leased: snapshots held")
            for name, _ in writer.tables:
                p = self.tables.get(name, TableProgress())
                c = writer.counts[name]
                table.add_row(name, str(len(writer.live[name])), str(c.inserts), str(c.updates), str(c.deletes),
                              str(p.log_end), str(p.lake_offset), str(p.lag), str(p.leased), str(p.rounds),
                              str(p.failures))
        return Group(head, table)


# --- the check -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TableCheck:
    table: str
    store_rows: int
    lake_rows: int
    missing: int
    extra: int
    different: int
    offsets_match: bool

    @property
    def equal(self) -> bool:
        return self.offsets_match and not (self.missing or self.extra or self.different)


def check_table(client: KvStoreClient, lake_root: str, info: TableInfo) -> TableCheck:
    """Compare the lake with a snapshot the store takes now (at its log end) row by row."""
    from deltalake import DeltaTable

    key_of = _key_function(info.primary_key)
    snapshots = client.take_snapshots(info.name).buckets
    store: dict[tuple, dict] = {}
    for snap in snapshots:
        for path in snap.files:
            for row in pq.read_table(path).to_pylist():
                store[key_of(row)] = _user(row)
    position = read_position(lake_root, info.name)
    reached = position.buckets if position is not None and position.table_id == info.table_id else {}
    offsets_match = all(reached.get(s.bucket, 0) == s.log_offset for s in snapshots)
    lake: dict[tuple, dict] = {}
    duplicates = 0
    if position is not None:
        for row in DeltaTable(table_path(lake_root, info.name)).to_pyarrow_table().to_pylist():
            key = key_of(row)
            duplicates += key in lake
            lake[key] = _user(row)
    return TableCheck(
        table=info.name,
        store_rows=len(store),
        lake_rows=len(lake) + duplicates,
        missing=len(store.keys() - lake.keys()),
        extra=len(lake.keys() - store.keys()) + duplicates,
        different=sum(1 for k in store.keys() & lake.keys() if store[k] != lake[k]),
        offsets_match=offsets_match,
    )


def _key_function(columns: list[str]) -> Callable[[dict], tuple]:
    return lambda row: tuple(row[c] for c in columns)


def _user(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in SYSTEM_COLUMNS}


# --- the run -------------------------------------------------------------------------------


def demo_config(data_dir: Path, store_url: str, zk_hosts: str, interval_s: float) -> TieringConfig:
    log4j = data_dir / "log4j2.properties"
    log4j.write_text(_SPARK_LOG4J.format(path=data_dir / "spark.log"))
    return load_config(None, {}, {
        "job.name": JOB,
        "job.checkpoint": str(data_dir / "checkpoint"),
        "kvstore.url": store_url,
        "zookeeper.hosts": zk_hosts,
        "lake.root": str(data_dir / "lake"),
        "trigger.interval_s": interval_s,
        "lease.duration_s": 60.0,
        "spark.spark.master": "local[2]",
        "spark.spark.ui.enabled": "false",
        "spark.spark.ui.showConsoleProgress": "false",
        "spark.spark.sql.shuffle.partitions": "4",
        "spark.spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={log4j}",
    })


class _JobThread(threading.Thread):
    """Leads the job and runs its query until ``stop`` is set; the error, if any, is kept."""

    def __init__(self, spark, config: TieringConfig, progress: Progress) -> None:
        super().__init__(name="demo-tiering", daemon=True)
        self.spark = spark
        self.config = config
        self.progress = progress
        self.stop_event = threading.Event()
        self.led = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        from tiering.coord.leader import acquire_leadership
        from tiering.job import TieringJob

        try:
            zk = self.config.zookeeper
            term = acquire_leadership(zk.hosts, JOB, zk.session_timeout_s, owner={"host": socket.gethostname(), "demo": True})
            try:
                self.progress.epoch = term.epoch
                self.led.set()
                hook = observability.attach(self.spark, self.config, term.epoch, listeners=[self.progress.on_round])
                job = TieringJob(self.spark, self.config, term.epoch, fence=term.check, on_round=hook)
                job.run(stop=self.stop_event)
            finally:
                term.resign()
        except BaseException as e:  # noqa: BLE001 - reported by the demo, which then fails
            self.error = e
            log.exception("demo tiering job failed")


def run_demo(options: DemoOptions, console: Console | None = None) -> bool:
    """Run the demo; True when every table of the lake equals the store. Cleans up on every path."""
    console = console or Console()
    created = options.data_dir is None
    data_dir = Path(tempfile.mkdtemp(prefix="kv-tiering-demo-")) if created else Path(options.data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    _log_to_file(data_dir / "demo.log")
    previous_term = signal.signal(signal.SIGTERM, _interrupt)
    zk = EmbeddedZooKeeper()
    store: StoreProcess | None = None
    spark = None
    writer: Writer | None = None
    job: _JobThread | None = None
    ok = False
    try:
        console.print(f"demo: data in {data_dir} (logs: demo.log, spark.log)")
        zk.start(data_dir / "zookeeper")
        console.print(f"demo: ZooKeeper pid {zk.pid} at {zk.hosts}")
        store = StoreProcess.start(data_dir / "kvstore", num_retained=2, gc_interval_s=5.0, snapshot_interval_s=15.0)
        console.print(f"demo: KV store pid {store.pid} at {store.url}")
        client = store.client()
        tables = _tables(options.tables)
        infos = [client.create_table(kind.spec(name[len(kind.name):])) for name, kind in tables]
        writer = Writer(client, tables)
        writer.load(options.initial_rows)
        for info in infos:
            client.take_snapshots(info.name)
        console.print(f"demo: {len(infos)} tables loaded: {', '.join(i.name for i in infos)}; starting Spark")

        config = demo_config(data_dir, store.url, zk.hosts, options.interval_s)
        spark = _start_spark(config)
        console.print(f"demo: Spark driver JVM pid {spark.sparkContext._jvm.ProcessHandle.current().pid()}")
        progress = Progress()
        job = _JobThread(spark, config, progress)
        job.start()
        started = time.monotonic()
        with Live(progress.render(writer, 0, data_dir), console=console, refresh_per_second=2, transient=False) as live:
            progress.phase = "tiering while writing"
            writer.start()
            caught_up = _watch(live, progress, writer, job, client, config, infos, data_dir, started,
                               until=lambda up: time.monotonic() - started >= options.duration_s)
            writer.stop()
            progress.phase = "writes stopped; catching up"
            deadline = time.monotonic() + options.catch_up_timeout_s
            caught_up = _watch(live, progress, writer, job, client, config, infos, data_dir, started,
                               until=lambda up: up or time.monotonic() >= deadline)
            progress.phase = "caught up" if caught_up else "did not catch up"
            live.update(progress.render(writer, time.monotonic() - started, data_dir))
        _stop_job(job)
        if writer.error is not None or job.error is not None:
            console.print(f"demo: FAILED: {writer.error or job.error}")
            return False
        if not caught_up:
            console.print(f"demo: FAILED: the lake did not reach the store's log end within {options.catch_up_timeout_s:.0f}s")
        checks = [check_table(client, config.lake.root, info) for info in infos]
        console.print(_render_checks(checks))
        ok = caught_up and all(c.equal for c in checks)
        console.print("demo: lake == store for every table" if ok else "demo: FAILED: the lake differs from the store")
        return ok
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not abandon the cleanup
        try:
            _cleanup(writer, job, spark, store, zk, console)
        finally:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, previous_term)
        if ok and created and not options.keep:
            shutil.rmtree(data_dir, ignore_errors=True)
        elif not ok:
            console.print(f"demo: data and logs kept in {data_dir}")


def _start_spark(config: TieringConfig):
    """Build the session in a helper thread, so pyspark installs no SIGINT handler of its own.

    pyspark's handler (installed when a SparkContext starts in the main thread) calls into the
    JVM to cancel jobs; during the context's start that call can hang, and Ctrl-C with it. Here
    the main thread only waits, and Ctrl-C interrupts the wait; an abandoned JVM exits when
    this process does (its stdin pipe closes).
    """
    from tiering.job import build_spark

    result: dict = {}

    def start() -> None:
        try:
            result["spark"] = build_spark(config)
            result["spark"].sparkContext.setLogLevel("ERROR")
        except BaseException as e:  # noqa: BLE001 - re-raised in the main thread
            result["error"] = e

    thread = threading.Thread(target=start, name="demo-spark-start", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.2)
    if "error" in result:
        raise result["error"]
    return result["spark"]


def _watch(live, progress, writer, job, client, config, infos, data_dir, started, until) -> bool:
    caught_up = False
    while True:
        if writer.error is not None or job.error is not None:
            return False
        if job.led.is_set():
            caught_up = progress.poll(client, config.lake.root, infos, observability.checkpoint_lease_id(config.job.checkpoint))
        live.update(progress.render(writer, time.monotonic() - started, data_dir))
        if until(caught_up):
            return caught_up
        time.sleep(1.0)


def _stop_job(job: _JobThread | None) -> None:
    if job is not None and job.is_alive():
        job.stop_event.set()
        job.join(timeout=60)


def _cleanup(writer, job, spark, store, zk, console) -> None:
    if writer is not None:
        writer.stop()
    _stop_job(job)
    if spark is not None:
        try:
            spark.stop()
        except Exception as e:  # noqa: BLE001 - the JVM may already be gone; keep cleaning up
            log.warning("stopping Spark: %s", e)
    if store is not None:
        store.stop()
    zk.stop()
    console.print("demo: stopped ZooKeeper, the KV store and Spark")


def _render_checks(checks: list[TableCheck]) -> Table:
    table = Table("table", "store rows", "lake rows", "missing", "extra", "differ", "offsets", "result",
                  title="lake vs store, row by row")
    for c in checks:
        table.add_row(c.table, str(c.store_rows), str(c.lake_rows), str(c.missing), str(c.extra), str(c.different),
                      "equal" if c.offsets_match else "DIFFER", "[green]EQUAL[/]" if c.equal else "[red]DIFFERENT[/]")
    return table


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _log_to_file(path: Path) -> None:
    """The live display owns the terminal: log lines go to ``path`` instead."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"))
    root.addHandler(handler)
    logging.getLogger("py4j").setLevel(logging.WARNING)
