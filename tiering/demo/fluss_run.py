"""`tiering demo --store fluss`: a real Apache Fluss cluster of its own, tiered into Delta Lake by the
job, then proof that the lake equals what Fluss holds.

Failure modes it is built to expose rather than hide: a row lost, duplicated or stale in the lake,
and a lake whose offsets claim more (or less) than each bucket's log end. The final check reads
Fluss on its own: every bucket's whole changelog replayed from offset 0 by pyfluss's record scanner
(the job bootstraps from the RocksDB snapshots through the Java client and reads only the changelog
past them, through its own reader), and Fluss's log ends through its admin. A run without the Fluss
jars or pyfluss stops before starting anything, naming the setup command.

Phases: start ZooKeeper and a Fluss cluster (loopback, free ports) -> create a primary-key table,
write rows, wait until every bucket's KV snapshot covers its log -> tier (availableNow: a bootstrap
from the snapshots) -> write updates and deletes -> tier again (the changelog) -> compare row by row.
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from tiering.conf.model import TieringConfig
from tiering.delta_log.lake import Lake
from tiering.demo.live import Progress
from tiering.demo.run import DemoOptions, JobThread, demo_config, demo_session, render_checks
from tiering.demo.services import DemoServices
from tiering.fluss.cluster import FlussCluster
from tiering.ops.verify import TableCheck, compare_rows

__all__ = ["FLUSS_JARS", "missing_fluss", "run_fluss_demo"]

#: where scripts/setup_fluss.sh puts the Fluss jars (deploy/jars/fluss/pom.xml pins them)
FLUSS_JARS = Path(__file__).resolve().parents[2] / "deploy" / "jars" / "fluss" / "lib"
DATABASE = "demo"
TABLE = "orders"
BUCKETS = 3
_SNAPSHOT_WAIT_S = 120.0
_REPLAY_WAIT_S = 60.0


def missing_fluss(jars_dir: Path | None = None) -> str | None:
    """Why this install cannot run the Fluss demo (naming the command that fixes it), None when it
    can; ``jars_dir``: :data:`FLUSS_JARS` unless given."""
    jars_dir = FLUSS_JARS if jars_dir is None else jars_dir
    for jar in ("fluss-server", "fluss-client"):
        if not sorted(jars_dir.glob(f"{jar}-*.jar")):
            return f"no {jar} jar in {jars_dir}: run scripts/setup_fluss.sh first"
    if importlib.util.find_spec("fluss") is None:
        return "no pyfluss, Fluss's Python client: pip install 'kv-tiering[fluss]'"
    return None


def client_jar(jars_dir: Path = FLUSS_JARS) -> Path:
    return sorted(jars_dir.glob("fluss-client-*.jar"))[-1]


def row(key: int, version: int) -> dict[str, Any]:
    return {"id": key, "name": f"order-{key}-v{version}", "amount": key * 100 + version}


@dataclass(frozen=True)
class FlussTable:
    """The demo's table in Fluss, written and read through pyfluss (never the job's readers)."""

    bootstrap_servers: str
    database: str = DATABASE
    table: str = TABLE

    def _path(self) -> Any:
        import fluss

        return fluss.TablePath(self.database, self.table)

    async def _connect(self) -> Any:
        import fluss

        return await fluss.FlussConnection.create(fluss.Config({"bootstrap.servers": self.bootstrap_servers}))

    def create(self) -> None:
        import fluss
        import pyarrow as pa

        async def create() -> None:
            connection = await self._connect()
            try:
                admin = connection.get_admin()
                await admin.create_database(self.database, ignore_if_exists=True)
                columns = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.int64())])
                schema = fluss.Schema(columns, primary_keys=["id"])
                await admin.create_table(self._path(), fluss.TableDescriptor(schema, bucket_count=BUCKETS))
            finally:
                await connection.close()

        asyncio.run(create())

    def write(self, upserts: Iterable[dict[str, Any]], deletes: Iterable[int] = ()) -> None:
        """Upsert ``upserts``, delete the keys ``deletes``, flushed: every write acknowledged."""

        async def write() -> None:
            connection = await self._connect()
            try:
                writer = (await connection.get_table(self._path())).new_upsert().create_writer()
                for values in upserts:
                    writer.upsert(values)
                for key in deletes:
                    writer.delete({"id": key})
                await writer.flush()
            finally:
                await connection.close()

        asyncio.run(write())

    def rows(self, timeout_s: float = _REPLAY_WAIT_S) -> tuple[int, dict[int, int], dict[tuple, dict[str, Any]]]:
        """The table's id, every bucket's log end, and its live rows by primary key: each bucket's
        changelog replayed from offset 0 to its log end (``+I``/``+U`` upsert, ``-D`` deletes, ``-U``
        is passed over: a ``+U`` follows it). The table is not written meanwhile."""
        import fluss

        async def read() -> tuple[int, dict[int, int], dict[tuple, dict[str, Any]]]:
            connection = await self._connect()
            try:
                admin = connection.get_admin()
                info = await admin.get_table_info(self._path())
                ends = dict(await admin.list_offsets(self._path(), list(range(BUCKETS)), fluss.OffsetSpec.latest()))
                scanner = await (await connection.get_table(self._path())).new_scan().create_log_scanner()
                return info.table_id, ends, await _replay(scanner, ends, timeout_s)
            finally:
                await connection.close()

        return asyncio.run(read())


async def _replay(scanner: Any, ends: dict[int, int], timeout_s: float) -> dict[tuple, dict[str, Any]]:
    rows: dict[tuple, dict[str, Any]] = {}
    reached = {bucket: 0 for bucket, end in ends.items() if end}
    for bucket in reached:
        scanner.subscribe(bucket, 0)
    deadline = time.monotonic() + timeout_s
    while any(reached[b] < ends[b] for b in reached):
        if time.monotonic() > deadline:
            raise TimeoutError(f"Fluss table {TABLE!r}: the changelog replay reached {reached} of the log ends {ends}")
        for table_bucket, records in (await scanner.poll(500)).items():
            bucket = table_bucket.bucket_id
            for record in records:
                if record.offset >= ends[bucket]:
                    continue
                reached[bucket] = record.offset + 1
                kind, values = record.change_type.short_string(), dict(record.row)
                if kind == "-D":
                    rows.pop((values["id"],), None)
                elif kind in ("+I", "+U"):
                    rows[(values["id"],)] = values
    return rows


def wait_for_snapshots(servers: str, table: str, timeout_s: float = _SNAPSHOT_WAIT_S) -> None:
    """Return once every bucket of ``table`` has a KV snapshot covering its log end (asked through
    the Spark driver's JVM, which has Fluss's Java client on ``spark.jars``)."""
    from tiering.fluss.store import FlussStore

    store = FlussStore(servers, DATABASE, client_jar())
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ends = store.log_ends([table])[table].buckets
            refs = store.latest_snapshots(table)
            if all(b in refs and refs[b].log_offset >= log.end for b, log in ends.items() if log.end):
                return
            time.sleep(0.5)
    finally:
        store.close()
    raise TimeoutError(f"Fluss table {table!r}: no KV snapshot covered its log within {timeout_s:.0f}s")


def check_lake(config: TieringConfig, fluss_table: FlussTable) -> TableCheck:
    """The lake against Fluss's own rows (a changelog replay) and log ends, row by row."""
    table_id, ends, held = fluss_table.rows()
    loaded = Lake.of(config.lake).load(fluss_table.table)
    position = loaded.position(table_id) if loaded is not None else None
    reached = position.buckets if position is not None else {}
    lake_rows = [] if loaded is None or position is None else loaded.to_arrow().to_pylist()
    offsets_match = all(reached.get(b, 0) == end for b, end in ends.items())
    return compare_rows(fluss_table.table, held, lake_rows, ["id"], offsets_match)


def run_fluss_demo(options: DemoOptions, console: Console | None = None) -> bool:
    """Run the Fluss demo; True when the lake equals Fluss. Cleans up on every path."""
    console = console or Console()
    with demo_session(options, console) as session:
        services: DemoServices = session.services
        services.start_zookeeper()
        cluster = services.start_fluss(FlussCluster(FLUSS_JARS, buckets=BUCKETS, snapshot_interval="2s"))
        fluss_table = FlussTable(cluster.bootstrap_servers)
        fluss_table.create()
        rows = options.initial_rows
        fluss_table.write(row(k, 0) for k in range(rows))
        console.print(f"demo: {rows} rows written to Fluss table {DATABASE}.{TABLE}; starting Spark")

        config = demo_config(
            session.data_dir,
            services.zk.hosts,
            options.interval_s,
            kvstore={"kind": "fluss", "bootstrap_servers": cluster.bootstrap_servers, "database": DATABASE},
            extra={"trigger.available_now": True, "spark.spark.jars": str(client_jar())},
        )
        services.start_spark(config)  # before the snapshots are asked for: its JVM has Fluss's Java client
        console.print("demo: waiting for a KV snapshot of every bucket")
        wait_for_snapshots(cluster.bootstrap_servers, TABLE)
        session.tier(JobThread(config, Progress()), "bootstrap from the KV snapshots")

        updated, deleted = range(0, rows, 3), list(range(1, rows, 5))
        fluss_table.write((row(k, 1) for k in updated), deleted)
        fluss_table.write(row(k, 0) for k in range(rows, rows + rows // 4))
        console.print(f"demo: {len(updated)} updates, {len(deleted)} deletes, {rows // 4} inserts written to Fluss")
        session.tier(JobThread(config, Progress()), "the changelog")

        check = check_lake(config, fluss_table)
        console.print(render_checks([check], "Fluss"))
        session.ok = check.equal
        console.print("demo: lake == Fluss" if check.equal else "demo: FAILED: the lake differs from Fluss")
    return session.ok
