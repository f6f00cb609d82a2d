"""Fluss's Python client (pyfluss) against a real cluster: the calls the job will plan log splits with.

What must hold for the job to build on it: a primary-key table's changelog, read bucket by bucket
from offset 0 to the log end ``list_offsets`` reports, holds every write once, at dense offsets,
with its change kind (+I, -U/+U around an update, -D carrying the deleted row); replaying it
gives the rows written; each key lives in one bucket. A log table (no primary key) beside it
reads back as appends.
"""

from __future__ import annotations

import asyncio
import datetime
from collections import defaultdict

import pyarrow as pa
import pytest

from tests.support.fluss import new_table

pytestmark = pytest.mark.integration

fluss = pytest.importorskip("fluss")

BUCKETS = 3
SCHEMA = pa.schema(
    [
        ("id", pa.int32()),
        ("name", pa.string()),
        ("amount", pa.int64()),
        ("price", pa.float64()),
        ("paid", pa.bool_()),
        ("day", pa.date32()),
    ]
)


def order(key: int, version: int = 0) -> dict:
    return {
        "id": key,
        "name": f"order-{key}-v{version}",
        "amount": key * 1_000_000_007 + version,
        "price": key + version / 4,
        "paid": (key + version) % 2 == 0,
        "day": datetime.date(2026, 1, 1) + datetime.timedelta(days=key + version),
    }


async def changelog(table, ends: dict[int, int]) -> dict[int, list]:
    """Every bucket's records from offset 0 to its log end (exclusive)."""
    scanner = await table.new_scan().create_log_scanner()
    records: dict[int, list] = defaultdict(list)
    for bucket, end in ends.items():
        if end:
            scanner.subscribe(bucket, 0)
    for _ in range(200):
        if all(len(records[b]) >= end for b, end in ends.items()):
            break
        polled = await scanner.poll(500)
        for table_bucket, batch in polled.items():
            records[table_bucket.bucket_id].extend(batch)
    return records


def test_a_primary_key_tables_changelog_per_bucket_replays_to_the_rows_written(fluss_cluster, fluss_database):
    async def scenario():
        schema = fluss.Schema(SCHEMA, primary_keys=["id"])
        connection, admin, path, table = await new_table(fluss_cluster, fluss_database, "orders", schema, BUCKETS)
        writer = table.new_upsert().create_writer()
        for key in range(1, 13):
            writer.upsert(order(key))
        for key in range(1, 5):
            writer.upsert(order(key, version=1))
        for key in (5, 6):
            writer.delete({"id": key})
        writer.delete({"id": 99})  # absent: writes nothing
        await writer.flush()
        ends = await admin.list_offsets(path, list(range(BUCKETS)), fluss.OffsetSpec.latest())
        info = await admin.get_table_info(path)
        records = await changelog(table, ends)
        await connection.close()
        return info, ends, records

    info, ends, records = asyncio.run(scenario())

    assert info.num_buckets == BUCKETS and info.get_primary_keys() == ["id"]
    assert sorted(ends) == list(range(BUCKETS))
    assert sum(ends.values()) == 12 + 4 * 2 + 2, ends  # inserts, updates as -U/+U pairs, deletes
    state: dict[int, dict] = {}
    kinds: dict[int, list[str]] = defaultdict(list)
    bucket_of: dict[int, set[int]] = defaultdict(set)
    for bucket, bucket_records in records.items():
        assert [r.offset for r in bucket_records] == list(range(ends[bucket])), f"bucket {bucket}'s offsets"
        for record in bucket_records:
            row, kind = dict(record.row), record.change_type.short_string()
            key = row["id"]
            kinds[key].append(kind)
            bucket_of[key].add(bucket)
            if kind in ("-U", "-D"):
                assert state.pop(key) == row, f"{kind} of key {key} carries the row it replaces"
            else:
                state[key] = row
    assert state == {k: order(k, version=1 if k <= 4 else 0) for k in (1, 2, 3, 4, *range(7, 13))}
    assert {k: kinds[k] for k in (1, 5, 7)} == {1: ["+I", "-U", "+U"], 5: ["+I", "-D"], 7: ["+I"]}
    assert all(len(buckets) == 1 for buckets in bucket_of.values()), bucket_of
    assert len(set().union(*bucket_of.values())) > 1, "the keys spread over several buckets"


def test_a_log_table_reads_back_as_appends(fluss_cluster, fluss_database):
    async def scenario():
        connection, admin, path, table = await new_table(
            fluss_cluster, fluss_database, "events", fluss.Schema(SCHEMA), BUCKETS
        )
        writer = table.new_append().create_writer()
        for key in range(1, 9):
            writer.append(order(key))
        await writer.flush()
        ends = await admin.list_offsets(path, list(range(BUCKETS)), fluss.OffsetSpec.latest())
        records = await changelog(table, ends)
        await connection.close()
        return table.has_primary_key(), ends, records

    has_key, ends, records = asyncio.run(scenario())

    assert not has_key
    assert sum(ends.values()) == 8, ends
    rows = [dict(r.row) for bucket_records in records.values() for r in bucket_records]
    kinds = {r.change_type.short_string() for bucket_records in records.values() for r in bucket_records}
    assert sorted(rows, key=lambda r: r["id"]) == [order(k) for k in range(1, 9)]
    assert kinds == {"+A"}
