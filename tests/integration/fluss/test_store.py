"""Apache Fluss behind the store seam (tiering/fluss/store.py), the parts the contract suite does not
cover: a log table is not a table to tier; a column without a lossless Spark type is refused naming
table and column (every type, read back: test_types.py); the Java client's JVM, retries, and a
pickled reader in Spark tasks.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest

from tests.support.fluss import client_jar, new_table
from tiering.errors import FlussClientError, SchemaMismatchError, StoreError, StoreUnavailableError
from tiering.fluss.jvm import FlussJvm
from tiering.kvstore import retry

pytestmark = pytest.mark.integration

fluss = pytest.importorskip("fluss")

from tiering.fluss.store import FlussStore  # noqa: E402  (pyfluss present)
from tiering.fluss.store import _java_call as java_call  # noqa: E402


@pytest.fixture(scope="module")
def database() -> str:
    return f"store_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def store(fluss_cluster, database) -> Iterator[FlussStore]:
    made = FlussStore(fluss_cluster.bootstrap_servers, database, client_jar())
    yield made
    made.close()


def create(cluster, database: str, table: str, schema: pa.Schema, rows: list[dict], key: list[str] | None = None):
    async def scenario():
        fluss_schema = fluss.Schema(schema, primary_keys=key) if key else fluss.Schema(schema)
        connection, _, _, created = await new_table(cluster, database, table, fluss_schema, 1)
        if rows:
            writer = created.new_upsert().create_writer()
            for row in rows:
                writer.upsert(row)
            await writer.flush()
        await connection.close()

    asyncio.run(scenario())


def test_a_log_table_is_not_listed_with_one_warning_naming_it_and_is_refused_by_name(
    fluss_cluster, database, store, caplog
):
    create(fluss_cluster, database, "events", pa.schema([("id", pa.int32()), ("name", pa.string())]), [])

    with caplog.at_level(logging.WARNING, logger="tiering.fluss.store"):
        listed = [{t.name for t in store.tables()} for _ in range(3)]
    assert all("events" not in names for names in listed)
    warned = [r.getMessage() for r in caplog.records if "events" in r.getMessage()]
    assert warned == [f"Fluss table {database}.events has no primary key: skipped (only primary-key tables tier)"]
    with pytest.raises(SchemaMismatchError, match="'events' has no primary key"):
        store.table("events")


def test_a_column_without_a_lossless_spark_type_is_refused_naming_table_and_column(fluss_cluster, database, store):
    schema = pa.schema([pa.field("id", pa.int32(), nullable=False), ("tags", pa.list_(pa.int32()))])
    create(fluss_cluster, database, "tagged", schema, [], key=["id"])

    with pytest.raises(SchemaMismatchError, match="table 'tagged': column 'tags' is array<int>"):
        store.table("tagged")


def test_a_driver_jvm_without_fluss_client_is_passed_over_for_a_jvm_of_its_own(spark, fluss_cluster):
    """The tests' Spark session has no fluss-client on spark.jars: the store starts a gateway JVM of
    its own from the jar, and without the jar says what is missing."""
    with pytest.raises(
        FlussClientError, match=r"the Spark driver's JVM has none \(put the fluss-client jar on spark.jars"
    ):
        FlussJvm.open(fluss_cluster.bootstrap_servers, None)

    java = FlussJvm.open(fluss_cluster.bootstrap_servers, client_jar())
    try:
        assert java.owned and java.gateway is not spark.sparkContext._gateway
        assert java.admin.listDatabases().get() is not None
    finally:
        java.close()


@pytest.mark.parametrize(
    ("exception", "raised", "attempts"),
    [("NotLeaderOrFollowerException", StoreUnavailableError, 3), ("InvalidTableException", StoreError, 1)],
)
def test_a_failure_fluss_marks_retriable_is_retried_and_others_are_not(
    spark, store, monkeypatch, exception, raised, attempts
):
    """Fluss's own exceptions as a failed future's cause, with a Spark session in the process (whose
    py4j exception handler would misread this gateway's thrown exceptions)."""
    monkeypatch.setattr(retry, "STORE_RETRY", retry.instant(retry.STORE_RETRY))
    java = store.java
    cause = getattr(java.jvm.org.apache.fluss.exception, exception)("bucket 0 moved")
    calls = []

    def failing():
        calls.append(1)
        return java.jvm.java.util.concurrent.CompletableFuture.failedFuture(cause)

    with pytest.raises(raised, match=f"{exception}: bucket 0 moved") as error:
        java_call(java, failing, "orders")

    assert type(error.value) is raised and len(calls) == attempts


def test_a_pickled_reader_reads_the_changelog_in_spark_tasks(spark, fluss_cluster, database, store):
    """As an executor gets it: each task's Python worker unpickles the reader and connects on its own."""
    rows = [{"id": k, "name": f"n{k}"} for k in range(1, 21)]
    schema = pa.schema([pa.field("id", pa.int32(), nullable=False), ("name", pa.string())])
    create(fluss_cluster, database, "tasked", schema, rows, key=["id"])
    table = store.table("tasked")
    ends = {b: log.end for b, log in store.log_ends(["tasked"])["tasked"].buckets.items()}
    reader = store.bucket_reader()

    def read(bucket: int) -> list[tuple[int, str]]:
        changes = [batch.to_pylist() for batch in reader.changelog(table, bucket, 0, ends[bucket])]
        reader.close()
        return [(change["id"], change["__op"]) for batch in changes for change in batch]

    read_in_tasks = spark.sparkContext.parallelize(sorted(ends), len(ends)).flatMap(read).collect()

    assert sorted(read_in_tasks) == [(k, "+I") for k in range(1, 21)]


def test_a_python_worker_reads_every_task_of_its_own_through_one_gateway_jvm(spark, fluss_cluster, database, store):
    """Spark reuses a Python worker for task after task: each task's unpickled reader is the
    worker's one reader, whose gateway JVM (started once, cold) serves the worker's later tasks
    too, instead of one more JVM per task kept until the worker exits."""
    schema = pa.schema([pa.field("id", pa.int32(), nullable=False), ("name", pa.string())])
    create(fluss_cluster, database, "reused", schema, [{"id": k, "name": f"n{k}"} for k in range(8)], key=["id"])
    table = store.table("reused")
    ends = {b: log.end for b, log in store.log_ends(["reused"])["reused"].buckets.items()}
    reader = store.bucket_reader()

    def read(task: int) -> list[tuple[int, int, int, int]]:
        import os

        bucket = task % len(ends)
        rows = sum(batch.num_rows for batch in reader.changelog(table, bucket, 0, ends[bucket]))
        snapshots = reader.java.admin.getLatestKvSnapshots(reader.java.path(database, "reused")).get()
        assert snapshots.getTableId() == table.table_id
        return [(os.getpid(), reader.java.gateway.gateway_parameters.port, bucket, rows)]

    tasks = 6
    read_in_tasks = spark.sparkContext.parallelize(range(tasks), tasks).flatMap(read).collect()

    jvms = {pid: {port for p, port, _, _ in read_in_tasks if p == pid} for pid, _, _, _ in read_in_tasks}
    assert {pid: len(ports) for pid, ports in jvms.items()} == dict.fromkeys(jvms, 1)
    assert {(bucket, rows) for _, _, bucket, rows in read_in_tasks} == set(ends.items())
