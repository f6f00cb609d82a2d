"""A bucket's KV snapshot read as Arrow (tiering/fluss/snapshot_arrow.py, our JVM writer in a
gateway JVM) against a real Fluss cluster.

What must hold: every bucket's snapshot gives the rows the oracle (tests/support/fluss_rows.py,
an independent read) says the table holds, every mapped type with its edge values and nulls, in
batches of exactly ``StoreTable.arrow_schema``; a bucket larger than one Arrow batch comes whole;
a gone snapshot is ``SnapshotUnavailableError`` naming table, bucket and snapshot, and a table
re-created since planning ``TableRecreatedError``; no temporary file is left, read or failed. A
gateway JVM started where no copy of our jar is found fails the first read in one line naming the
jar, the places looked in and how to get it.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest

from tests.integration.fluss.test_types import COLUMNS, HIGH, LOW, NULLS
from tests.support.fluss import client_jar, connect
from tests.support.fluss_source import source_jar
from tests.support.store_sides import SNAPSHOT_WAIT
from tests.support.waiting import wait_until
from tiering.errors import FlussClientError, SnapshotUnavailableError, TableRecreatedError
from tiering.fluss import jvm
from tiering.fluss.jvm import FlussJvm
from tiering.kvstore.contract import SnapshotRef

pytestmark = pytest.mark.integration

fluss = pytest.importorskip("fluss")

from tiering.fluss.snapshot_arrow import snapshot_batches  # noqa: E402  (pyfluss present)
from tiering.fluss.store import FlussStore  # noqa: E402

BUCKETS = 3
#: more rows than one Arrow batch of the writer holds (65,536)
MANY = 70_000
MISSING_SNAPSHOT = 999_999


@pytest.fixture(autouse=True)
def _our_jar() -> None:
    source_jar()  # skips without it: the store's gateway JVM (conftest.py) puts it beside fluss-client


@pytest.fixture
def temp_dir(tmp_path, monkeypatch) -> Path:
    """The process's temporary directory for the test, to see what a read leaves there."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def covering_snapshots(store: FlussStore, table: str) -> dict[int, SnapshotRef]:
    """Each written bucket's latest snapshot, once each covers the bucket's log end."""
    ends = {b: log.end for b, log in store.log_ends([table])[table].buckets.items() if log.end}

    def covering() -> dict[int, SnapshotRef] | None:
        latest = store.latest_snapshots(table)
        covered = all(b in latest and latest[b].log_offset >= end for b, end in ends.items())
        return {b: latest[b] for b in ends} if covered else None

    return wait_until(covering, f"snapshots of {table} covering {ends}", **SNAPSHOT_WAIT)


def read_all(store: FlussStore, table: str) -> tuple[list[pa.RecordBatch], pa.Schema]:
    planned = store.table(table)
    batches = [
        batch
        for ref in covering_snapshots(store, table).values()
        for batch in snapshot_batches(store.java, store.database, planned, ref)
    ]
    return batches, planned.arrow_schema


def test_every_mapped_type_reads_back_as_the_oracle_says_in_the_tables_arrow_types(writer, store, temp_dir):
    writer.create_table("typed", {name: fluss for name, (fluss, _) in COLUMNS.items()}, ["id"], buckets=BUCKETS)
    extra = [HIGH | {"id": key} for key in range(10, 20)]
    writer.upsert("typed", [HIGH, LOW, NULLS, *extra])
    writer.upsert("typed", [LOW | {"id": 10}])
    writer.delete("typed", [{"id": 11}])

    batches, schema = read_all(store, "typed")

    assert batches and all(batch.schema == schema for batch in batches)
    rows = sorted(pa.Table.from_batches(batches, schema).to_pylist(), key=lambda r: r["id"])
    assert rows == writer.current_rows("typed")
    expected = [HIGH, LOW, NULLS, LOW | {"id": 10}, *(r for r in extra if r["id"] not in (10, 11))]
    assert rows == sorted(expected, key=lambda r: r["id"])
    assert list(temp_dir.iterdir()) == []


def test_a_bucket_larger_than_one_arrow_batch_comes_whole(fluss_cluster, database, store, temp_dir):
    async def load() -> None:
        connection = await connect(fluss_cluster)
        try:
            path = fluss.TablePath(database, "many")
            schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("note", pa.string())])
            await connection.get_admin().create_table(
                path, fluss.TableDescriptor(fluss.Schema(schema, primary_keys=["id"]), bucket_count=1)
            )
            upserts = (await connection.get_table(path)).new_upsert().create_writer()
            for key in range(MANY):
                upserts.upsert({"id": key, "note": f"n{key}"})
            await upserts.flush()
        finally:
            await connection.close()

    asyncio.run(load())

    batches, schema = read_all(store, "many")

    assert len(batches) == 2
    read = pa.Table.from_batches(batches, schema).sort_by("id")
    assert read.column("id").to_pylist() == list(range(MANY))
    assert read.column("note").to_pylist() == [f"n{key}" for key in range(MANY)]
    assert list(temp_dir.iterdir()) == []


def test_a_gone_snapshot_is_unavailable_naming_table_bucket_and_snapshot(writer, store, temp_dir):
    writer.create_table("gone", {"id": "INT NOT NULL", "note": "STRING"}, ["id"])
    writer.upsert("gone", [{"id": 1, "note": "a"}])
    planned = store.table("gone")
    ref = SnapshotRef(planned.table_id, 0, MISSING_SNAPSHOT, 1)

    with pytest.raises(SnapshotUnavailableError, match=rf"'gone' bucket 0 snapshot {MISSING_SNAPSHOT}: .*gone") as e:
        list(snapshot_batches(store.java, store.database, planned, ref))

    assert e.value.table == "gone"
    assert list(temp_dir.iterdir()) == []


def test_a_table_re_created_since_planning_is_refused_naming_both_ids(writer, store, temp_dir):
    columns = {"id": "INT NOT NULL", "note": "STRING"}
    writer.create_table("again", columns, ["id"])
    writer.upsert("again", [{"id": 1, "note": "old"}])
    planned = store.table("again")
    ref = covering_snapshots(store, "again")[0]
    new_id = writer.recreate_table("again", columns, ["id"])

    with pytest.raises(TableRecreatedError, match=rf"table id {planned.table_id}, now {new_id}"):
        list(snapshot_batches(store.java, store.database, planned, ref))

    assert list(temp_dir.iterdir()) == []


def test_a_gateway_jvm_without_our_jar_fails_the_first_read_naming_the_jar_and_how_to_get_it(
    fluss_cluster, writer, store, temp_dir, monkeypatch
):
    writer.create_table("nojar", {"id": "INT NOT NULL", "note": "STRING"}, ["id"])
    planned = store.table("nojar")
    monkeypatch.setattr(jvm, "SNAPSHOT_SOURCE_PLACES", (temp_dir / "package", temp_dir / "target"))
    java = FlussJvm.open(fluss_cluster.bootstrap_servers, client_jar())
    try:
        with pytest.raises(FlussClientError) as refused:
            next(snapshot_batches(java, store.database, planned, SnapshotRef(planned.table_id, 0, 1, 1)))
    finally:
        java.close()

    assert str(refused.value) == (
        "the JVM reading Fluss snapshots has no kvtiering.fluss.snapshot.ArrowSnapshotWriter: no "
        f"fluss-snapshot-source-*.jar in {temp_dir / 'package'} or {temp_dir / 'target'} to start it with "
        "(a kv-tiering wheel built after scripts/setup_fluss_source.sh carries it; in a checkout that script builds it)"
    )
    assert list(temp_dir.iterdir()) == []
