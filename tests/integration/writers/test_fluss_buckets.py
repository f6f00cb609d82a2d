"""A bucket of an Apache Fluss table written to the lake through the store's reader (no files): its
KV snapshot's rows, held by the job's lease while they are read, then a changelog of inserts,
updates and deletes on top; the files written hold what a lookup of every key in Fluss finds."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.fluss import client_jar, connect, new_table
from tests.support.lake import delta_rows
from tests.support.store_sides import SNAPSHOT_WAIT
from tests.support.waiting import wait_until
from tiering.delta_log.lake import Lake
from tiering.enumerator.splits import LogSplit, SnapshotSplit
from tiering.kvstore.contract import BucketId, SnapshotRef, StoreTable
from tiering.objectstore.object_store import ObjectStore
from tiering.writers.bucket_plan import BucketBase, BucketPlan, plan_buckets
from tiering.writers.buckets import BucketTask, write_bucket
from tiering.writers.delta_rs_writer import DeltaRsRoundWriter
from tiering.writers.executor_writes import run_bucket_tasks
from tiering.writers.round_writer import PreparedRound, TableCommit, WritePath

pytestmark = pytest.mark.integration

fluss = pytest.importorskip("fluss")

from tiering.fluss.store import FlussStore  # noqa: E402  (pyfluss present)

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("n", pa.int32())])
LEASE = "fluss-buckets-test"


@pytest.fixture
def database() -> str:
    return f"lake_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def store(fluss_cluster, database) -> Iterator[FlussStore]:
    made = FlussStore(fluss_cluster.bootstrap_servers, database, client_jar())
    yield made
    made.close()


def write(cluster, database: str, upserts: list[dict], deletes: list[int], *, create: bool = False) -> None:
    async def scenario():
        if create:
            connection, _, _, table = await new_table(
                cluster, database, "orders", fluss.Schema(SCHEMA, primary_keys=["id"]), 1
            )
        else:
            connection = await connect(cluster)
            table = await connection.get_table(fluss.TablePath(database, "orders"))
        writer = table.new_upsert().create_writer()
        for row in upserts:
            writer.upsert(row)
        for key in deletes:
            writer.delete({"id": key})
        await writer.flush()
        await connection.close()

    asyncio.run(scenario())


def looked_up(cluster, database: str, keys: range) -> list[dict]:
    """Every key's row as a fresh pyfluss lookup finds it (None: absent): not the product's reader."""

    async def scenario():
        connection = await connect(cluster)
        table = await connection.get_table(fluss.TablePath(database, "orders"))
        lookuper = table.new_lookup().create_lookuper()
        found = [await lookuper.lookup({"id": key}) for key in keys]
        await connection.close()
        return found

    return [row for row in asyncio.run(scenario()) if row is not None]


def lake_rows(objects: ObjectStore, table: StoreTable, written, columns: list[str] | None = None) -> list[dict]:
    rows = []
    for f in written:
        with objects.filesystem.open_input_file(objects.path(f"{objects.uri(table.name)}/{f.path}")) as handle:
            rows += pq.read_table(handle, columns=columns).to_pylist()
    return sorted(rows, key=lambda r: r["id"])


def held_snapshot(store: FlussStore) -> tuple[StoreTable, SnapshotRef]:
    """The table, and a snapshot of its bucket covering every write so far, held by the lease
    from here on (its files stay however many newer ones are taken)."""
    table = store.table("orders")
    end = store.log_ends(["orders"])["orders"].buckets[0].end
    ref = wait_until(
        lambda: (s := store.latest_snapshots("orders").get(0)) and s.log_offset >= end and s,
        f"a snapshot of orders covering offset {end}",
        **SNAPSHOT_WAIT,
    )
    store.create(LEASE, 1, 60_000)
    assert store.acquire(LEASE, 1, 60_000, [ref]) == []
    return table, ref


def test_a_fluss_bucket_is_its_leased_snapshot_and_changelog_read_through_the_reader(
    fluss_cluster, database, store, tmp_path
):
    write(fluss_cluster, database, [{"id": k, "name": f"v{k}", "n": k} for k in range(1, 41)], [], create=True)
    table, ref = held_snapshot(store)
    updates = [{"id": k, "name": f"u{k}", "n": -k} for k in range(1, 11)]  # +U, and -U a read drops
    inserts = [{"id": k, "name": f"v{k}", "n": k} for k in range(41, 51)]
    write(fluss_cluster, database, updates + inserts, deletes=[11, 12, 13, 45])
    end = store.log_ends(["orders"])["orders"].buckets[0].end
    splits = [
        SnapshotSplit("orders", 0, table.table_id, ref.snapshot_id, ref.log_offset),
        LogSplit("orders", 0, table.table_id, ref.log_offset, end),
    ]
    objects = ObjectStore.of(str(tmp_path / "lake"))

    (plan,) = plan_buckets(table, splits, {}, None, {}, reader=store.bucket_reader())
    try:
        written = write_bucket(BucketTask(table, objects.uri(table.name), plan, objects))
    finally:
        plan.reader.close()
        store.drop(LEASE, 1)

    assert (plan.base, plan.base_files, plan.log_files, plan.log_from, plan.log_to) == (
        BucketBase.SNAPSHOT,
        (),
        (),
        ref.log_offset,
        end,
    )
    assert not plan.bare_snapshot and plan.num_changes >= 24  # an upper bound: -U offsets have no change
    expected = looked_up(fluss_cluster, database, range(1, 51))
    assert len(expected) == 46
    assert lake_rows(objects, table, written, SCHEMA.names) == expected


def test_a_bare_fluss_snapshot_is_rows_written_with_its_offset_and_no_store_time(
    fluss_cluster, database, store, tmp_path
):
    write(fluss_cluster, database, [{"id": k, "name": None, "n": k} for k in range(5)], [], create=True)
    table, ref = held_snapshot(store)
    reader = store.bucket_reader()
    plan = BucketPlan(0, BucketBase.SNAPSHOT, (), (), ref.log_offset, ref.log_offset, ref.snapshot_id, reader=reader)
    objects = ObjectStore.of(str(tmp_path / "lake"))
    try:
        written = write_bucket(BucketTask(table, objects.uri(table.name), plan, objects))
    finally:
        reader.close()
        store.release(LEASE, 1, [BucketId(table.table_id, 0)])
        store.drop(LEASE, 1)

    rows = lake_rows(objects, table, written)
    assert [(r["id"], r["name"], r["__offset"], r["__timestamp"]) for r in rows] == [
        (k, None, ref.log_offset - 1, None) for k in range(5)
    ]


def test_each_fluss_bucket_is_read_and_written_by_its_own_spark_task(spark, fluss_cluster, database, store, tmp_path):
    """On the executors, as a bootstrap runs: the plans travel pickled with their reader, and each
    task's Python worker reads its bucket's snapshot (a JVM of its own, from the client jar) and
    changelog itself; nothing of the rows passes through the driver."""

    async def create():
        connection, _, _, _ = await new_table(
            fluss_cluster, database, "orders", fluss.Schema(SCHEMA, primary_keys=["id"]), 2
        )
        await connection.close()

    asyncio.run(create())
    write(fluss_cluster, database, [{"id": k, "name": f"v{k}", "n": k} for k in range(30)], [])
    table = store.table("orders")
    ends = {b: log.end for b, log in store.log_ends(["orders"])["orders"].buckets.items()}
    refs = wait_until(
        lambda: (
            (s := store.latest_snapshots("orders")) and all(s.get(b) and s[b].log_offset >= ends[b] for b in ends) and s
        ),
        "snapshots of both buckets",
        **SNAPSHOT_WAIT,
    )
    store.create(LEASE, 1, 60_000)
    assert store.acquire(LEASE, 1, 60_000, list(refs.values())) == []
    write(fluss_cluster, database, [{"id": k, "name": "late", "n": 0} for k in range(0, 30, 3)], deletes=[1, 2])
    ends = {b: log.end for b, log in store.log_ends(["orders"])["orders"].buckets.items()}
    splits = [SnapshotSplit("orders", b, table.table_id, r.snapshot_id, r.log_offset) for b, r in refs.items()]
    splits += [LogSplit("orders", b, table.table_id, refs[b].log_offset, ends[b]) for b in ends]
    objects = ObjectStore.of(str(tmp_path / "lake"))
    plans = plan_buckets(table, splits, {}, None, {}, reader=store.bucket_reader())
    try:
        results = run_bucket_tasks(spark, [BucketTask(table, objects.uri(table.name), p, objects) for p in plans])
    finally:
        store.drop(LEASE, 1)

    (written,) = results.values()
    assert sorted(r.bucket for r in written) == [0, 1] and [r.error for r in written] == [None, None]
    rows = lake_rows(objects, table, [f for r in written for f in r.files], SCHEMA.names)
    assert rows == looked_up(fluss_cluster, database, range(30))


def test_a_writer_prepares_a_fluss_tables_rounds_with_the_reader_and_merges_through_it(
    spark, fluss_cluster, database, store, tmp_path
):
    """``RoundWriter.prepare(..., reader=)``: no files, every bucket plan carries the reader. With
    the change data feed on, the bootstrap is a rewrite on the executors and the changelog round
    after it one MERGE by the driver, whose source is read through the reader too."""
    write(fluss_cluster, database, [{"id": k, "name": f"v{k}", "n": k} for k in range(20)], [], create=True)
    table, ref = held_snapshot(store)
    write(fluss_cluster, database, [{"id": k, "name": f"u{k}", "n": -k} for k in (0, 1, 25)], deletes=[2])
    middle = store.log_ends(["orders"])["orders"].buckets[0].end
    lake = Lake.at(str(tmp_path / "lake"))
    writer = DeltaRsRoundWriter(spark, lake, "fluss-job", change_data_feed=True)

    def commit(round_id: int, splits: list) -> TableCommit:
        prepared = writer.prepare(
            table,
            splits,
            {},
            lake.load("orders"),
            epoch=1,
            round_id=round_id,
            lease_id=LEASE,
            reader=store.bucket_reader(),
        )
        assert isinstance(prepared, PreparedRound) and all(p.reader is not None for p in prepared.plans)
        results = writer.write_files(writer.tasks(prepared)).get(table.name, [])
        return writer.commit(prepared, writer.written_files(prepared, results))

    try:
        first = commit(
            1,
            [
                SnapshotSplit("orders", 0, table.table_id, ref.snapshot_id, ref.log_offset),
                LogSplit("orders", 0, table.table_id, ref.log_offset, middle),
            ],
        )
        write(fluss_cluster, database, [{"id": k, "name": f"w{k}", "n": 7} for k in (3, 30)], deletes=[4, 25])
        end = store.log_ends(["orders"])["orders"].buckets[0].end
        second = commit(2, [LogSplit("orders", 0, table.table_id, middle, end)])
    finally:
        store.drop(LEASE, 1)

    assert (first.written_by, second.written_by) == (WritePath.EXECUTORS, WritePath.DRIVER_MERGE)
    assert (dict(first.positions), dict(second.positions)) == ({0: middle}, {0: end})
    rows = sorted(delta_rows(lake.path("orders")).select(SCHEMA.names).to_pylist(), key=lambda r: r["id"])
    assert rows == looked_up(fluss_cluster, database, range(40))
