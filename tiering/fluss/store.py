"""Apache Fluss behind the store seam (:mod:`tiering.kvstore.contract`): pyfluss for tables, log ends
and the changelog; Fluss's Java client (:mod:`tiering.fluss.jvm`) for snapshots, the lease and
a snapshot's rows.

How Fluss maps onto the seam (docs/DESIGN.md §3, "The store seam"): the store is one Fluss
database, a table its primary-key tables (a log table is left out of the listing, with one
warning naming it per process); a table's id is Fluss's table id (new when re-created); offsets
are Fluss's log offsets. A changelog read drops ``-U``
records (a ``+U`` follows each, holding the new row), so offsets in a read have gaps. A snapshot is
``getLatestKvSnapshots``' per bucket, its ``log_offset`` the offset it covers up to.

Failure modes it guards against: pyfluss is async, and a caller of this module may itself run in
an event loop's thread or in a Spark worker, so each object runs pyfluss on a private event loop,
one call at a time. A tablet server restarting fails calls for a while, some of them with
pyfluss client errors it does not flag retriable ("Table info not found"): those are retried as
its retriable ones are. Fluss 0.9.1 answers every ``acquireSnapshots`` with no unavailable snapshot,
so an acquire looks each snapshot up after holding it and returns the ones that are gone. A Fluss
lease has no epoch: the epoch is checked here, by the store object that calls (the highest seen
per lease id; a lower one is ``FencedEpochError``); a renewal of a dropped or lapsed lease is silently accepted by
Fluss, so ``renew`` cannot report one. An unclean tablet restart can lose acked writes and move a
log end back; this module reports what Fluss says. A snapshot's rows are read in the JVM of the
process that reads (an executor's Python worker starts a gateway JVM of its own, once: a reader
unpickled there is the worker's one reader of the database, so its next tasks find the JVM and
the connections started), written there as Arrow by our writer and mapped here
(:mod:`tiering.fluss.snapshot_arrow`). Fluss takes the lake's
progress only through its coordinator's internal calls: :attr:`FlussStore.lake_progress` is None
unless asked for (:mod:`tiering.fluss.lake_progress`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from tenacity import Retrying

from tiering.errors import (
    FencedEpochError,
    LeaseUnsupportedError,
    SchemaMismatchError,
    SnapshotUnavailableError,
    StoreError,
    StoreUnavailableError,
    TableNotFoundError,
    one_line,
)
from tiering.fluss.jvm import FlussJvm, java_set, long_map
from tiering.fluss.lake_progress import FlussLakeProgress
from tiering.fluss.snapshot_arrow import snapshot_batches
from tiering.fluss.types import store_column
from tiering.kvstore import retry
from tiering.kvstore.contract import (
    DELETE,
    INSERT,
    OFFSET_COLUMN,
    OP_COLUMN,
    TIMESTAMP_COLUMN,
    UPDATE,
    BucketId,
    BucketLog,
    SnapshotRef,
    StoreTable,
    TableClaims,
    TableLog,
    changelog_schema,
)

__all__ = ["FlussStore", "FlussBucketReader"]

log = logging.getLogger(__name__)

#: pyfluss's error code for a table the database does not hold (``fluss.ErrorCode.TABLE_NOT_EXIST``)
_TABLE_NOT_EXIST = 7
#: pyfluss 1.0's client error, not flagged retriable, for a bucket whose leader it does not know yet
#: (a table just created): Java's client says LeaderNotAvailableException, a RetriableException
_NO_LEADER_YET = "No leader found for table bucket"
#: pyfluss 1.0's client error, not flagged retriable, for a table whose metadata it dropped when a
#: refresh failed (a tablet server restarting); a table that is gone is ``_TABLE_NOT_EXIST`` instead
_NO_TABLE_INFO = "Table info not found for"
#: Fluss's change kinds as the seam's op codes; ``-U`` (the row an update replaces) is dropped
_OPS = {"+I": INSERT, "+U": UPDATE, "-D": DELETE}
_SYSTEM = frozenset({OFFSET_COLUMN, OP_COLUMN, TIMESTAMP_COLUMN})
#: how long a changelog read waits for records it was told exist, and one poll's wait
_READ_DEADLINE_S = 60.0
_POLL_MS = 500
#: the root of the exceptions Fluss's Java client marks retriable, and the ones the seam names
_RETRIABLE = "org.apache.fluss.exception.RetriableException"
_TABLE_NOT_EXIST_JAVA = "org.apache.fluss.exception.TableNotExistException"
_SNAPSHOT_NOT_EXIST = "KvSnapshotNotExistException"
#: what Fluss 0.9.1's server answers a release naming a table its lease holds nothing of
_UNKNOWN_SERVER_ERROR = "UnknownServerException"
#: what Fluss's Java client says of a call the server does not know (a server without the lease API)
_NO_LEASE_API = "UnsupportedVersionException"
#: a lease handle made only to release or drop with: Fluss sends a duration with acquire and renew only
_UNUSED_DURATION_MS = 1
#: how long pyfluss's own threads take to wind a failed connect down (see :meth:`_Connections.close`)
_FAILED_CONNECT_SETTLE_S = 0.2


class _Connections:
    """A private event loop with a pyfluss connection on it, and a Fluss JVM: both made on first
    use (the JVM's, or ahead of it: :meth:`open_java_soon`) and dropped when pickled (a Spark task
    makes its own). Each has its own lock: a pyfluss call does not wait for a JVM to start."""

    def __init__(
        self,
        bootstrap_servers: str,
        database: str,
        client_jar: Path | None,
        options: Mapping[str, str],
        retrying: Retrying | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.database = database
        self.client_jar = client_jar
        self.options = dict(options)
        #: the pyfluss calls' retry policy: ``STORE_RETRY`` unless given (a probe asks once)
        self.retrying = retrying
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connection: Any = None
        self._java: FlussJvm | None = None
        self._java_lock = threading.Lock()
        #: the thread :meth:`open_java_soon` opens the Java client on (None: not asked to)
        self.opening: threading.Thread | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {k: self.__dict__[k] for k in ("bootstrap_servers", "database", "client_jar", "options")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def _run(self, make: Any, *args: Any, table: str | None = None) -> Any:
        """``make(connection, *args)``'s coroutine run to its end on the private loop; pyfluss's
        errors as the seam's, the retryable ones retried as every store call is (``STORE_RETRY``:
        a bucket whose leader is not elected yet, a tablet restarting)."""
        return (self.retrying or retry.STORE_RETRY).copy()(self._run_once, make, *args, table=table)

    def _run_once(self, make: Any, *args: Any, table: str | None = None) -> Any:
        import fluss

        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
            try:
                return self._loop.run_until_complete(self._call(make, *args))
            except fluss.FlussError as e:
                raise _store_error(e, self.bootstrap_servers, table) from e

    async def _call(self, make: Any, *args: Any) -> Any:
        """pyfluss makes its futures on the running loop: every call, the connection's too, is
        made inside it."""
        import fluss

        if self._connection is None:
            config = fluss.Config({**_python_options(self.options), "bootstrap.servers": self.bootstrap_servers})
            self._connection = await fluss.FlussConnection.create(config)
        return await make(self._connection, *args)

    @property
    def java(self) -> FlussJvm:
        with self._java_lock:
            if self._java is None:
                self._java = FlussJvm.open(self.bootstrap_servers, self.client_jar, self.options)
            return self._java

    def open_java_soon(self) -> threading.Thread:
        """Open :attr:`java` on a daemon thread (once) and return it: for a process whose first Java
        call comes after other work (a driver's lease claim after its query's set-up, the planning
        process's first snapshots after its catalog and lake reads), so the JVM's start and
        fluss-client's class loading overlap that work; the first call then waits for what is left
        of it. It asks the cluster nothing (the client connects on its first call), so a cluster
        that is down cannot hold it; a failure to open (no fluss-client) is logged only, and the
        first call, opening again, fails as it would have."""
        with self._java_lock:
            if self.opening is None:
                self.opening = threading.Thread(target=self._open_java, name="fluss-java-client", daemon=True)
                self.opening.start()
            return self.opening

    def _open_java(self) -> None:
        try:
            self.java  # noqa: B018  # opened for the first call to find
        except Exception as e:  # the first call opens it again and raises
            log.debug("Fluss's Java client not opened ahead of its first call: %s", e)

    def close(self) -> None:
        if self.opening is not None:
            self.opening.join()  # a client opened after this close would be left open
        with self._lock, self._java_lock:
            if self._connection is not None and self._loop is not None:
                self._loop.run_until_complete(_closed(self._connection))
            elif self._loop is not None:  # a connect that failed: pyfluss winds it down on its own threads,
                time.sleep(_FAILED_CONNECT_SETTLE_S)  # and a process that exits meanwhile aborts (SIGABRT)
            if self._loop is not None:
                self._loop.close()
            if self._java is not None:
                self._java.close()
            self._loop = self._connection = self._java = self.opening = None


def _python_options(options: Mapping[str, str]) -> dict[str, str]:
    """The client options pyfluss knows (it refuses any other; Fluss's Java client takes them all):
    a key known to it is an attribute of its ``Config``, spelt with ``_`` for ``.`` and ``-``."""
    import fluss

    known = set(dir(fluss.Config))
    return {k: v for k, v in options.items() if k.replace(".", "_").replace("-", "_") in known}


async def _closed(connection: Any) -> None:
    await connection.close()


def _store_error(error: Any, servers: str, table: str | None) -> StoreError:
    message = f"Fluss at {servers}: {error.message}" + (f" (table {table!r})" if table else "")
    if error.error_code == _TABLE_NOT_EXIST:
        return TableNotFoundError(message, code="TABLE_NOT_FOUND", table=table)
    if error.is_retriable or _NO_LEADER_YET in error.message or _NO_TABLE_INFO in error.message:
        return StoreUnavailableError(message, table=table)
    return StoreError(message, table=table)


class FlussStore(_Connections):
    """:class:`~tiering.kvstore.contract.PlanningStore` of one Fluss database. ``client_jar``:
    fluss-client, for a JVM of its own where the process has no SparkContext; ``options``: Fluss
    client options, for the Java client and the ones pyfluss knows; ``report_lake_progress``: tell
    Fluss the lake's progress (its internal API, ``[kvstore] report_lake_progress``)."""

    def __init__(
        self,
        bootstrap_servers: str,
        database: str,
        client_jar: Path | None = None,
        options: Mapping[str, str] | None = None,
        retrying: Retrying | None = None,
        report_lake_progress: bool = False,
    ) -> None:
        super().__init__(bootstrap_servers, database, client_jar, options or {}, retrying)
        self._progress = FlussLakeProgress(lambda: self.java, database) if report_lake_progress else None
        self._epochs: dict[str, int] = {}
        self._leases: dict[str, tuple[int, Any]] = {}
        #: the log tables already warned of: one warning each per process, not one per round
        self._skipped: set[str] = set()
        #: the reader :meth:`bucket_reader` gives this process (made once, closed with the store)
        self._reader: FlussBucketReader | None = None

    def __repr__(self) -> str:
        return f"FlussStore({self.bootstrap_servers!r}, {self.database!r})"

    def _path(self, name: str) -> Any:
        import fluss

        return fluss.TablePath(self.database, name)

    def tables(self) -> list[StoreTable]:
        async def listed(connection: Any) -> list[Any]:
            admin = connection.get_admin()
            names = await admin.list_tables(self.database)
            return await asyncio.gather(*(admin.get_table_info(self._path(name)) for name in names))

        infos = self._run(listed)
        for info in infos:
            name = info.table_path.table_name
            if not info.has_primary_key() and name not in self._skipped:
                self._skipped.add(name)
                log.warning(
                    "Fluss table %s.%s has no primary key: skipped (only primary-key tables tier)", self.database, name
                )
        return [_store_table(info) for info in infos if info.has_primary_key()]

    def databases(self) -> list[str]:
        """The cluster's databases: what ``tiering check`` names when the configured one is missing."""
        return sorted(self._run(lambda connection: connection.get_admin().list_databases()))

    @property
    def log_tables(self) -> frozenset[str]:
        """The log tables (no primary key) :meth:`tables` has left out so far."""
        return frozenset(self._skipped)

    def table(self, name: str) -> StoreTable:
        info = self._run(lambda connection: connection.get_admin().get_table_info(self._path(name)), table=name)
        if not info.has_primary_key():
            raise SchemaMismatchError(
                f"Fluss table {name!r} has no primary key: only primary-key tables tier", table=name
            )
        return _store_table(info)

    def log_ends(self, tables: Sequence[str] | None = None) -> dict[str, TableLog]:
        """The tables' logs asked for at once (two ``list_offsets`` per table: its first and its
        end offsets, every bucket in each); None: every primary-key table's. Fluss keeps no lake
        report a job made: none is ``reported``."""

        names = [t.name for t in self.tables()] if tables is None else list(tables)

        async def ends(connection: Any) -> dict[str, TableLog]:
            admin = connection.get_admin()
            logs = await asyncio.gather(*(_table_log(admin, self._path(name)) for name in names))
            return {name: log for name, log in zip(names, logs, strict=True) if log is not None}

        return self._run(ends)

    def latest_snapshots(self, table: str) -> dict[int, SnapshotRef]:
        java = self.java
        snapshots = _java_call(java, lambda: java.admin.getLatestKvSnapshots(java.path(self.database, table)), table)
        table_id = snapshots.getTableId()
        latest = {}
        for bucket in snapshots.getBucketIds():
            snapshot_id = snapshots.getSnapshotId(bucket)
            if snapshot_id.isPresent():
                offset = snapshots.getLogOffset(bucket).getAsLong()
                latest[bucket] = SnapshotRef(table_id, bucket, snapshot_id.getAsLong(), offset)
        return latest

    def snapshot_available(self, table: str, ref: SnapshotRef) -> bool:
        return _snapshot_exists(self.java, ref)

    def _fence(self, lease_id: str, epoch: int) -> None:
        seen = self._epochs.get(lease_id, epoch)
        if epoch < seen:
            raise FencedEpochError(
                f"lease {lease_id}: epoch {epoch} is below {seen}, which this process saw",
                lease_id=lease_id,
                epoch=epoch,
            )
        self._epochs[lease_id] = epoch

    def _lease(self, lease_id: str, epoch: int, duration_ms: int) -> Any:
        """The lease's handle for ``duration_ms`` (Fluss fixes a handle's duration when it is made)."""
        self._fence(lease_id, epoch)
        kept = self._leases.get(lease_id)
        if kept is None or kept[0] != duration_ms:
            kept = (duration_ms, self.java.admin.createKvSnapshotLease(lease_id, duration_ms))
            self._leases[lease_id] = kept
        return kept[1]

    def create(self, lease_id: str, epoch: int, duration_ms: int) -> None:
        """The lease's handle, renewed: Fluss keeps a lease from its first acquire on, and renews
        one it does not hold without a word."""
        lease = self._lease(lease_id, epoch, duration_ms)
        _java_call(self.java, lease.renew, None, lease_id)

    def acquire(
        self,
        lease_id: str,
        epoch: int,
        duration_ms: int,
        snapshots: Sequence[SnapshotRef],
        owners: TableClaims | None = None,
    ) -> list[SnapshotRef]:
        # owners: Fluss keeps no table epochs to check a group member's claim against; the claim's
        # table epochs fence the member's Delta commits instead (docs/DESIGN.md §7)
        lease = self._lease(lease_id, epoch, duration_ms)
        java = self.java
        if not snapshots:
            _java_call(self.java, lease.renew, None, lease_id)
            return []
        held = long_map(java.gateway, {java.bucket(s.table_id, s.bucket): s.snapshot_id for s in snapshots})
        answer = _java_call(java, lambda: lease.acquireSnapshots(held), None, lease_id)
        refused = {(b.getTableId(), b.getBucket()) for b in answer.getUnavailableSnapshots().keySet()}
        # 0.9.1 refuses nothing: a snapshot already collected is only found by looking it up
        return [s for s in snapshots if (s.table_id, s.bucket) in refused or not _snapshot_exists(java, s)]

    def renew(self, lease_id: str, epoch: int, duration_ms: int) -> None:
        lease = self._lease(lease_id, epoch, duration_ms)
        _java_call(self.java, lease.renew, None, lease_id)

    def held(self, lease_id: str) -> None:
        """None: Fluss lists no lease's holds."""
        return None

    def _kept(self, lease_id: str) -> Any:
        """The lease's handle, or one made to release or drop with (its duration unused)."""
        kept = self._leases.get(lease_id)
        return kept[1] if kept else self.java.admin.createKvSnapshotLease(lease_id, _UNUSED_DURATION_MS)

    def release(self, lease_id: str, epoch: int, buckets: Sequence[BucketId]) -> None:
        """One call per table: Fluss 0.9.1 fails a whole release naming a table the lease holds
        nothing of (an ``UnknownServerException``, from a null lookup on the server) where the seam
        lets go of a bucket not held without a word; such a table's answer is taken as nothing to
        release. Another failure is raised."""
        self._fence(lease_id, epoch)
        lease, java = self._kept(lease_id), self.java
        by_table: dict[int, list[int]] = {}
        for b in buckets:
            by_table.setdefault(b.table_id, []).append(b.bucket)
        for table_id, chosen in sorted(by_table.items()):
            held = java_set(java.gateway, [java.bucket(table_id, b) for b in sorted(set(chosen))])
            try:
                _java_call(java, lambda held=held: lease.releaseSnapshots(held), None, lease_id)
            except StoreError as e:
                if _UNKNOWN_SERVER_ERROR not in e.message:
                    raise
                log.debug("lease %s: Fluss holds nothing of table_id %d to release: %s", lease_id, table_id, e)

    def drop(self, lease_id: str, epoch: int) -> None:
        self._fence(lease_id, epoch)
        lease = self._kept(lease_id)
        self._leases.pop(lease_id, None)
        _java_call(self.java, lease.dropLease, None, lease_id)

    @property
    def lake_progress(self) -> FlussLakeProgress | None:
        """None unless made with ``report_lake_progress``."""
        return self._progress

    @property
    def files(self) -> None:
        """None: a Fluss snapshot is RocksDB files and its log is Fluss's own; both are read."""
        return None

    def bucket_reader(self) -> FlussBucketReader:
        """This store's one reader: what the driver reads with it (a driver-written round's
        changelog, a freshness read) shares its connection, and :meth:`close` closes it; pickled
        into a task, it is that process's reader instead (:func:`_process_reader`)."""
        with self._lock:
            if self._reader is None:
                self._reader = FlussBucketReader(self.bootstrap_servers, self.database, self.client_jar, self.options)
            return self._reader

    def close(self) -> None:
        """The connections, the JVM this store started, the lease handles made on them and the
        reader it gave (a store used again reconnects)."""
        with self._lock:
            reader, self._reader = self._reader, None
            self._leases.clear()
        try:
            if reader is not None:
                reader.close()
        finally:
            super().close()

    def with_retry_deadline(self, seconds: float) -> FlussStore:
        """This store: its calls keep the one retry policy it was made with."""
        return self


class FlussBucketReader(_Connections):
    """:class:`~tiering.kvstore.contract.BucketReader` of one Fluss database. Unpickled, it is the
    process's one reader of that database (:func:`_process_reader`): a Spark Python worker runs task
    after task, and each task's own reader would start a gateway JVM, cold, and keep it, with its
    connections, until the worker exits."""

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return _process_reader, (self.bootstrap_servers, self.database, self.client_jar, tuple(self.options.items()))

    def warm(self) -> None:
        """Start this reader's gateway JVM and load the classes a snapshot read uses (our writer's,
        fluss-client's snapshot scanner, its shaded Arrow, RocksDB with its native library): called
        in an executor's Python worker before a round, on the process's reader, it leaves that
        round's first read in the worker nothing to start. It asks the cluster nothing (no data, no
        lease: the client connects on its first call), so a cluster that is down cannot hold it."""
        java = self.java
        loader = java.jvm.java.lang.Thread.currentThread().getContextClassLoader()
        for name in _SNAPSHOT_READ_CLASSES:
            java.jvm.java.lang.Class.forName(name, True, loader)

    def changelog(self, table: StoreTable, bucket: int, start: int, end: int) -> Iterator[pa.RecordBatch]:
        """A batch per poll of the bucket's log scanner; ``-U`` records left out."""
        if start >= end:
            return
        schema = changelog_schema(table)
        scanner = self._run(_subscribed, self.database, table.name, bucket, start, table=table.name)
        deadline = time.monotonic() + _READ_DEADLINE_S
        reached = start
        while reached < end:
            if time.monotonic() > deadline:
                raise StoreUnavailableError(
                    f"Fluss at {self.bootstrap_servers}: table {table.name!r} bucket {bucket}: read "
                    f"[{start}, {reached}) of [{start}, {end}) in {_READ_DEADLINE_S:.0f} s",
                    table=table.name,
                )
            records = self._run(_polled, scanner, table=table.name)
            if records:
                reached = records[-1].offset + 1
                kept = [r for r in records if r.offset < end and r.change_type.short_string() in _OPS]
                if kept:
                    yield _changes(schema, kept)

    def snapshot_rows(self, table: StoreTable, ref: SnapshotRef) -> Iterator[pa.RecordBatch]:
        """Written as Arrow by our JVM writer in this process's JVM and mapped here
        (:mod:`tiering.fluss.snapshot_arrow`): never a py4j call per row."""
        yield from snapshot_batches(self.java, self.database, table, ref)


#: what a bucket snapshot's first read loads, in the order it does (RocksDB's static initialiser
#: loads its native library): :meth:`FlussBucketReader.warm` loads them ahead of it
_SNAPSHOT_READ_CLASSES = (
    "kvtiering.fluss.snapshot.ArrowSnapshotWriter",
    "kvtiering.fluss.snapshot.ArrowRows",
    "org.apache.fluss.client.table.scanner.batch.KvSnapshotBatchScanner",
    "org.apache.fluss.shaded.arrow.org.apache.arrow.memory.RootAllocator",
    "org.apache.fluss.shaded.arrow.org.apache.arrow.vector.ipc.ArrowFileWriter",
    "org.rocksdb.RocksDB",
)

#: the readers unpickled in this process, by what they were made with: kept for the process's life
_READERS: dict[tuple[Any, ...], FlussBucketReader] = {}
_READERS_LOCK = threading.Lock()


def _process_reader(
    bootstrap_servers: str, database: str, client_jar: Path | None, options: tuple[tuple[str, str], ...]
) -> FlussBucketReader:
    """This process's reader of ``database``, made on first use: its JVM and pyfluss connection
    serve every later task the process runs. A reader closed meanwhile reconnects on its next read."""
    key = (bootstrap_servers, database, client_jar, options)
    with _READERS_LOCK:
        if key not in _READERS:
            _READERS[key] = FlussBucketReader(bootstrap_servers, database, client_jar, dict(options))
        return _READERS[key]


def _path_of(database: str, name: str) -> Any:
    import fluss

    return fluss.TablePath(database, name)


async def _table_log(admin: Any, path: Any) -> TableLog | None:
    """A table's log, None when the database does not hold it."""
    import fluss

    try:
        info = await admin.get_table_info(path)
    except fluss.FlussError as e:
        if e.error_code == _TABLE_NOT_EXIST:
            return None
        raise
    buckets = list(range(info.num_buckets))
    starts = await admin.list_offsets(path, buckets, fluss.OffsetSpec.earliest())
    ends = await admin.list_offsets(path, buckets, fluss.OffsetSpec.latest())
    return TableLog(info.table_id, {b: BucketLog(b, starts[b], ends[b]) for b in buckets})


async def _subscribed(connection: Any, database: str, table: str, bucket: int, start: int) -> Any:
    """A log scanner of ``bucket`` from ``start``; ``SnapshotUnavailableError`` when ``start`` is
    below the bucket's first readable offset (the changes there are gone)."""
    import fluss

    path = _path_of(database, table)
    first = (await connection.get_admin().list_offsets(path, [bucket], fluss.OffsetSpec.earliest()))[bucket]
    if start < first:
        raise SnapshotUnavailableError(
            f"Fluss table {table!r} bucket {bucket}: offset {start} is gone, the log starts at {first}", table=table
        )
    scanner = await (await connection.get_table(path)).new_scan().create_log_scanner()
    scanner.subscribe(bucket, start)
    return scanner


async def _polled(connection: Any, scanner: Any) -> list[Any]:
    """One poll's records, in offset order (one bucket is subscribed)."""
    return [record for batch in (await scanner.poll(_POLL_MS)).values() for record in batch]


def _changes(schema: pa.Schema, records: list[Any]) -> pa.RecordBatch:
    """Records as a changelog batch of ``schema`` (changelog_schema's): Fluss's change kinds as op
    codes, its record times (epoch milliseconds) as ``__timestamp``."""
    user = pa.struct([field for field in schema if field.name not in _SYSTEM])
    # one conversion of the rows (dicts) into a struct's columns: a pass over the rows per column
    # in Python costs several times more
    columns = pa.array([r.row for r in records], user).flatten()
    columns.append(pa.array([r.offset for r in records], pa.int64()))
    columns.append(pa.array([_OPS[r.change_type.short_string()] for r in records], pa.string()))
    stamps = pa.array([r.timestamp for r in records], pa.int64()).cast(pa.timestamp("ms", tz="UTC"))
    columns.append(stamps.cast(schema.field(TIMESTAMP_COLUMN).type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _store_table(info: Any) -> StoreTable:
    name = info.table_path.table_name
    columns = tuple(store_column(name, column, spelled) for column, spelled in info.get_schema().get_columns())
    return StoreTable(name, info.table_id, columns, tuple(info.get_primary_keys()), info.num_buckets)


def _java_call(java: FlussJvm, start: Any, table: str | None, lease_id: str | None = None) -> Any:
    """The value of the future ``start()`` returns, retried as every store call is (``STORE_RETRY``)
    while Fluss marks its failure retriable; a failure as the seam's error."""
    return retry.STORE_RETRY.copy()(_java_once, java, start, table, lease_id)


def _java_once(java: FlussJvm, start: Any, table: str | None, lease_id: str | None) -> Any:
    from py4j.protocol import Py4JError

    try:
        value, failure = java.outcome(start())
    except Py4JError as e:  # the call itself failed: the gateway gone, a wrong argument
        raise StoreError(f"Fluss's client: {one_line(e)[:300]}", table=table, lease_id=lease_id) from e
    if failure is None:
        return value
    kinds, text = java.failure_kinds(failure)
    message = f"Fluss at {java.bootstrap_servers}: {text}"
    if lease_id is not None and any(k.endswith(_NO_LEASE_API) for k in kinds):
        raise LeaseUnsupportedError(message, lease_id=lease_id)
    if _TABLE_NOT_EXIST_JAVA in kinds:
        raise TableNotFoundError(message, code="TABLE_NOT_FOUND", table=table)
    kind = StoreUnavailableError if _RETRIABLE in kinds else StoreError
    raise kind(message, table=table, lease_id=lease_id)


def _snapshot_exists(java: FlussJvm, ref: SnapshotRef) -> bool:
    """Whether the cluster still has the snapshot's metadata (``getKvSnapshotMetadata``)."""
    bucket = java.bucket(ref.table_id, ref.bucket)
    try:
        _java_call(java, lambda: java.admin.getKvSnapshotMetadata(bucket, ref.snapshot_id), None)
    except StoreError as e:
        if _SNAPSHOT_NOT_EXIST in e.message:
            return False
        raise
    return True
