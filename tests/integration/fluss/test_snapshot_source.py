"""Our Spark source of Fluss KV snapshots (format ``fluss-snapshot``, jvm/fluss-snapshot-source)
against a real cluster, from PySpark: the reader the job's snapshot splits will run on.

What must hold: reading a table's latest snapshots gives, bucket by bucket, the rows written up to
the offsets they cover (not the writes after), every column type a primary-key table holds
converted exactly, in one Spark partition per bucket holding only that bucket's rows; a snapshot
that does not exist and a column type Spark cannot hold fail in one line naming the table and the
bucket and snapshot or the column. fluss-client bundles org.rocksdb (frocksdbjni 6.20), lz4, zstd
and commons-lang3 unrelocated: in a driver pyspark's own jars win, and the read above runs on
them. The module runs as it is on the oldest pyspark too (the driver runs on the pyspark the test
process imports).
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlparse

import pyspark
import pytest

from tests.support.fluss import client_jar, connect
from tests.support.fluss_java import FlussJava, fluss_java
from tests.support.fluss_source import (
    BUCKET_COLUMN,
    PARTITION_COLUMN,
    DriverAnswer,
    read_snapshots,
    snapshot_options,
    source_jar,
)

pytestmark = pytest.mark.integration

fluss = pytest.importorskip("fluss")

BUCKETS = 3
TABLE = "all_types"
UNREADABLE = "with_array"
#: every type a primary-key table can hold, as Fluss names them
COLUMNS = {
    "id": "INT NOT NULL",
    "flag": "BOOLEAN",
    "tiny": "TINYINT",
    "small": "SMALLINT",
    "big": "BIGINT",
    "real": "FLOAT",
    "dbl": "DOUBLE",
    "price": "DECIMAL(10, 2)",
    "wide": "DECIMAL(38, 6)",
    "code": "CHAR(3)",
    "name": "STRING",
    "tag": "BINARY(4)",
    "blob": "BYTES",
    "day": "DATE",
    "clock": "TIME(3)",
    "at": "TIMESTAMP(6)",
    "at_ltz": "TIMESTAMP_LTZ(6)",
}
#: the classes fluss-client bundles unrelocated, and the ones only its jar or ours hold
BUNDLED = (
    "org.rocksdb.RocksDB",
    "net.jpountz.lz4.LZ4Factory",
    "com.github.luben.zstd.Zstd",
    "org.apache.commons.lang3.StringUtils",
)
FLUSS_CLASS = "org.apache.fluss.client.table.scanner.batch.KvSnapshotBatchScanner"
OUR_CLASS = "kvtiering.fluss.snapshot.FlussSnapshotSource"
MISSING_SNAPSHOT = 999_999


def row(key: int, version: int = 0) -> dict:
    """A row of every type; key 7's nullable columns are all null."""
    if key == 7:
        return {"id": key, **{name: None for name in COLUMNS if name != "id"}}
    v = key * 10 + version
    return {
        "id": key,
        "flag": v % 2 == 0,
        "tiny": v % 256 - 128,
        "small": -32_000 + v,
        "big": v * 1_000_000_000_007,
        "real": v + 0.5,
        "dbl": v / 3,
        "price": Decimal(f"{v}.{v % 100:02d}"),
        "wide": Decimal(f"-12345678901234567890{v:010d}.{v:06d}"),  # 36 digits
        "code": f"c{v % 100:02d}",
        "name": f"name-{key}-v{version}-é",
        "tag": bytes([v % 256, 1, 2, 3]),
        "blob": bytes(range(v % 7)) + b"\x00\xff",
        "day": datetime.date(1969, 12, 1) + datetime.timedelta(days=v),
        "clock": datetime.time(v % 24, v % 60, v % 60, (v % 1000) * 1000),
        "at": datetime.datetime(2026, 1, 1, 12, 0, 0, v) + datetime.timedelta(days=v),
        "at_ltz": datetime.datetime(2026, 6, 1, 0, 0, 0, v, tzinfo=datetime.UTC) - datetime.timedelta(hours=v),
    }


def as_read(written: dict) -> dict:
    """A written row as the source reads it back: TIME as milliseconds since midnight."""
    clock = written["clock"]
    if clock is None:
        return written
    millis = clock.hour * 3_600_000 + clock.minute * 60_000 + clock.second * 1000 + clock.microsecond // 1000
    return {**written, "clock": millis}


def write(cluster, database: str, table: str, upserts: list[dict], deletes: tuple[int, ...] = ()) -> dict[int, int]:
    """Write with pyfluss; returns each bucket's log end after the write."""

    async def scenario():
        connection = await connect(cluster)
        path = fluss.TablePath(database, table)
        writer = (await connection.get_table(path)).new_upsert().create_writer()
        for upsert in upserts:
            writer.upsert(upsert)
        for key in deletes:
            writer.delete({"id": key})
        await writer.flush()
        ends = await connection.get_admin().list_offsets(path, list(range(BUCKETS)), fluss.OffsetSpec.latest())
        await connection.close()
        return ends

    return asyncio.run(scenario())


@pytest.fixture(scope="module")
def java(fluss_cluster) -> Iterator[FlussJava]:
    with fluss_java(fluss_cluster.bootstrap_servers) as client:
        yield client


@pytest.fixture(scope="module")
def scenario(fluss_cluster, java, tmp_path_factory) -> tuple[dict[int, int], list[dict], DriverAnswer]:
    """Written, snapshotted, written again, then read in one driver: the snapshots (bucket ->
    id), the rows as of them, and the driver's answer to four reads: the snapshots, bucket 0 at a
    snapshot that does not exist, a table with an ARRAY column, and a bucket option that names no
    bucket."""
    source_jar()  # skip before any work without it
    database = f"source_{uuid.uuid4().hex[:8]}"
    java.create_table(database, TABLE, COLUMNS, "id", BUCKETS)
    java.create_table(database, UNREADABLE, {"id": "INT NOT NULL", "items": "ARRAY<INT>"}, "id", BUCKETS)
    write(fluss_cluster, database, TABLE, [row(k) for k in range(30)])
    ends = write(fluss_cluster, database, TABLE, [row(k, 1) for k in range(0, 30, 3)], deletes=(28, 29))
    _, snapshots = java.snapshots_covering(database, TABLE, ends)
    expected = [as_read(row(k, 1 if k % 3 == 0 else 0)) for k in range(28)]
    write(fluss_cluster, database, TABLE, [row(k, 2) for k in range(30)], deletes=(1, 2))  # after the snapshots

    options = snapshot_options(fluss_cluster.bootstrap_servers, database, TABLE, snapshots)
    reads = [
        options,
        {**options, "snapshot.0": str(MISSING_SNAPSHOT)},
        snapshot_options(fluss_cluster.bootstrap_servers, database, UNREADABLE, {0: 1}),
        {**options, "snapshot.first": "1"},
    ]
    work = tmp_path_factory.mktemp("snapshot-read")
    return snapshots, expected, read_snapshots(work, reads, (*BUNDLED, FLUSS_CLASS, OUR_CLASS))


def test_the_snapshots_read_back_as_the_rows_written_up_to_their_offsets(scenario):
    _, expected, answer = scenario
    read = answer.reads[0]
    assert read.error is None, read.error
    assert read.rows is not None
    rows = sorted(read.rows.drop_columns([BUCKET_COLUMN, PARTITION_COLUMN]).to_pylist(), key=lambda r: r["id"])

    assert [r["id"] for r in rows] == [r["id"] for r in expected]
    for got, want in zip(rows, expected, strict=True):
        assert got == want, f"key {want['id']}"


def test_one_spark_partition_per_bucket_each_holding_its_bucket_only(scenario):
    snapshots, _, answer = scenario
    read = answer.reads[0]
    assert read.rows is not None

    assert read.partitions == BUCKETS == len(snapshots)
    pairs = set(zip(read.rows[PARTITION_COLUMN].to_pylist(), read.rows[BUCKET_COLUMN].to_pylist(), strict=True))
    buckets_of = {p: {b for q, b in pairs if q == p} for p, _ in pairs}
    assert buckets_of == {p: {p} for p in range(BUCKETS)}, buckets_of  # planned in bucket order
    fields = {f.name: f for f in read.rows.schema}
    assert str(fields["clock"].type) == "int32" and str(fields["at"].type) == "timestamp[us]"


def test_a_snapshot_that_does_not_exist_fails_naming_table_bucket_and_snapshot(scenario):
    _, _, answer = scenario
    error = answer.reads[1].error

    assert error is not None
    assert f"{TABLE} bucket 0 snapshot {MISSING_SNAPSHOT}: the snapshot does not exist" in error, error


def test_a_column_type_spark_cannot_hold_fails_naming_table_and_column(scenario):
    _, _, answer = scenario
    error = answer.reads[2].error

    assert error is not None
    assert f"{UNREADABLE}: column items has type ARRAY<INT>, which it cannot read" in error, error


def test_an_option_naming_no_bucket_fails_naming_it_and_what_was_expected(scenario):
    _, _, answer = scenario
    error = answer.reads[3].error

    assert error is not None
    assert "option snapshot.first=1: expected snapshot.<bucket>=<snapshot id>, both non-negative" in error, error


def test_fluss_clients_bundled_classes_are_pysparks_own_and_the_read_runs_on_them(scenario):
    _, _, answer = scenario
    pyspark_jars = (Path(pyspark.__file__).parent / "jars").resolve()

    winners = {name: Path(urlparse(location).path) for name, location in answer.classes.items()}
    assert {name: winners[name].parent for name in BUNDLED} == dict.fromkeys(BUNDLED, pyspark_jars), winners
    assert winners[FLUSS_CLASS].name == client_jar().name
    assert winners[OUR_CLASS].name == source_jar().name
    assert answer.reads[0].error is None
