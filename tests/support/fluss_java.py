"""Fluss's Java client (fluss-client) driven through py4j from a Spark driver's JVM.

The JVM is the one a PySpark driver runs: pyspark's own ``launch_gateway`` starts it through
spark-submit with fluss-client on ``spark.jars``, so Fluss's classes load as the job's driver will
load them, after Spark's jars (fluss-client bundles ``org.rocksdb`` unrelocated: Spark's
rocksdbjni comes first). No SparkContext is started: class loading is the same without one, and
the tests' shared session keeps the test process's one SparkContext slot.

py4j pitfall handled here: a small Python int arrives as ``java.lang.Integer`` and Fluss unboxes
``Map<TableBucket, Long>`` values as ``Long`` (a ClassCastException), and a ``Long`` returned to
Python comes back as an int; :meth:`FlussJava.long_map` builds the map inside the JVM
(tiering/fluss/jvm.py's, the product's own).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.fluss import client_jar
from tests.support.waiting import wait_until
from tiering.fluss.jvm import java_set, long_map

SCAN_POLL_S = 5
#: snapshots come every 0.5 s (the fixture's kv.snapshot.interval); many of them, on a busy machine
SNAPSHOT_WAIT = {"timeout_s": 60.0, "interval_s": 0.25}


class FlussJava:
    """A fluss-client ``Connection`` to one cluster, and the calls the tests make with it."""

    def __init__(self, gateway, bootstrap_servers: str) -> None:
        self.gateway = gateway
        self.jvm = gateway.jvm
        configuration = self.jvm.org.apache.fluss.config.Configuration.fromMap({"bootstrap.servers": bootstrap_servers})
        self.connection = self.jvm.org.apache.fluss.client.ConnectionFactory.createConnection(configuration)
        self.admin = self.connection.getAdmin()

    def path(self, database: str, table: str):
        return self.jvm.org.apache.fluss.metadata.TablePath.of(database, table)

    def bucket(self, table_id: int, bucket: int):
        return self.jvm.org.apache.fluss.metadata.TableBucket(table_id, bucket)

    def create_table(self, database: str, table: str, columns: dict[str, str], primary_key: str, buckets: int) -> None:
        """A primary-key table whose columns are given as Fluss type strings (``"CHAR(3)"``): the
        types pyarrow cannot name, through Fluss's own type parser."""
        jvm = self.jvm
        builder = jvm.org.apache.fluss.metadata.Schema.newBuilder()
        for name, type_name in columns.items():
            builder = builder.column(name, jvm.org.apache.fluss.types.DataTypeParser.parse(type_name))
        keys = self.gateway.new_array(jvm.java.lang.String, 1)
        keys[0] = primary_key
        schema = builder.primaryKey(keys).build()
        descriptor = jvm.org.apache.fluss.metadata.TableDescriptor.builder().schema(schema)
        descriptor = descriptor.distributedBy(buckets, self.gateway.new_array(jvm.java.lang.String, 0))
        self.admin.createDatabase(database, jvm.org.apache.fluss.metadata.DatabaseDescriptor.EMPTY, True).get()
        self.admin.createTable(self.path(database, table), descriptor.build(), False).get()

    def latest_snapshots(self, database: str, table: str) -> tuple[int, dict[int, tuple[int, int]]]:
        """The table id, and bucket -> (snapshot id, log offset it covers up to) for each bucket
        with a snapshot (``Admin.getLatestKvSnapshots``)."""
        snapshots = self.admin.getLatestKvSnapshots(self.path(database, table)).get()
        latest = {}
        for bucket in snapshots.getBucketIds():
            snapshot_id = snapshots.getSnapshotId(bucket)
            if snapshot_id.isPresent():
                latest[bucket] = (snapshot_id.getAsLong(), snapshots.getLogOffset(bucket).getAsLong())
        return snapshots.getTableId(), latest

    def snapshots_covering(self, database: str, table: str, ends: dict[int, int]) -> tuple[int, dict[int, int]]:
        """The table id and bucket -> snapshot id, once every bucket's latest snapshot covers
        ``ends`` (each bucket's log end): exactly, so a snapshot's rows are the rows written."""

        def covering():
            table_id, latest = self.latest_snapshots(database, table)
            if all(b in latest and latest[b][1] >= end for b, end in ends.items()):
                return table_id, {b: latest[b] for b in ends}
            return None

        table_id, latest = wait_until(covering, f"snapshots of {database}.{table} covering {ends}", **SNAPSHOT_WAIT)
        assert all(latest[b][1] == end for b, end in ends.items()), f"snapshots past the log ends {ends}: {latest}"
        return table_id, {b: snapshot_id for b, (snapshot_id, _) in latest.items()}

    def snapshot_exists(self, table_bucket, snapshot_id: int) -> bool:
        """Whether the cluster still has the snapshot's metadata (``getKvSnapshotMetadata``)."""
        # The failure is taken as a value (``exceptionally``), never thrown across py4j: once the
        # test process holds a SparkContext, pyspark reads every gateway's Java exceptions through
        # Spark's own JVM, where this gateway's object ids mean other objects.
        future = self.admin.getKvSnapshotMetadata(table_bucket, snapshot_id)
        value = future.exceptionally(self.jvm.java.util.function.Function.identity()).get()
        if not self.jvm.java.lang.Class.forName("java.lang.Throwable").isInstance(value):
            return True
        causes = []
        while value is not None:
            causes.append(value.toString())
            value = value.getCause()
        if any("KvSnapshotNotExistException" in cause for cause in causes):
            return False
        raise AssertionError(f"getKvSnapshotMetadata({table_bucket.toString()}, {snapshot_id}) failed: {causes}")

    def snapshot_rows(self, database: str, table: str, bucket: int, snapshot_id: int) -> list[dict[str, Any]]:
        """One bucket's snapshot rows, read in this JVM by ``KvSnapshotBatchScanner`` (it downloads
        the snapshot's RocksDB files and opens them), as dicts by column name."""
        fluss_table = self.connection.getTable(self.path(database, table))
        info = fluss_table.getTableInfo()
        row_type = info.getRowType()
        names = list(row_type.getFieldNames())
        getters = self.jvm.org.apache.fluss.row.InternalRow.createFieldGetters(row_type)
        scanner = fluss_table.newScan().createBatchScanner(self.bucket(info.getTableId(), bucket), snapshot_id)
        rows = []
        try:
            while (batch := scanner.pollBatch(self.jvm.java.time.Duration.ofSeconds(SCAN_POLL_S))) is not None:
                while batch.hasNext():
                    row = batch.next()
                    fields = zip(names, getters, strict=True)
                    rows.append({name: _python(getter.getFieldOrNull(row)) for name, getter in fields})
                batch.close()
        finally:
            scanner.close()
            fluss_table.close()
        return rows

    def long_map(self, entries: dict[Any, int]):
        return long_map(self.gateway, entries)

    def java_set(self, items):
        return java_set(self.gateway, items)

    def class_location(self, name: str) -> str:
        return class_location(self.jvm, name)

    def close(self) -> None:
        self.admin.close()
        self.connection.close()


def class_location(jvm, name: str) -> str:
    """Where a driver's class loader (the one spark.jars joins) loads ``name`` from."""
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    found = jvm.java.lang.Class.forName(name, False, loader)
    return found.getProtectionDomain().getCodeSource().getLocation().toString()


def _python(value):
    """A field's value as Python has it: py4j converts Java's boxed numbers and booleans;
    Fluss's ``BinaryString`` is made a str."""
    return value if value is None or isinstance(value, (bool, int, float)) else value.toString()


@contextmanager
def fluss_java(bootstrap_servers: str) -> Iterator[FlussJava]:
    """A Spark driver's JVM with fluss-client on spark.jars, and a connection to the cluster."""
    from pyspark import SparkConf
    from pyspark.java_gateway import launch_gateway

    conf = SparkConf().set("spark.jars", str(client_jar())).set("spark.ui.enabled", "false")
    gateway = launch_gateway(conf)
    try:
        client = FlussJava(gateway, bootstrap_servers)
        try:
            yield client
        finally:
            client.close()
    finally:
        gateway.shutdown()
        gateway.proc.stdin.close()
        gateway.proc.wait()
