"""The data files are the contract with Spark: snapshots hold exactly the live rows, log
segments hold every change with dense offsets, and bulk Arrow writes scale to a million rows.
The cases share the module's store (``emptied_kv_store``) but the one timing periodic snapshots."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.waiting import STORE_PACE, wait_until
from tiering.kvstore.bucketing import bucket_of
from tiering.kvstore.models import TableSpec

pytestmark = pytest.mark.integration

UTC = dt.UTC
SPEC = TableSpec(
    name="events",
    schema=[
        {"name": "tenant", "type": "string"},
        {"name": "day", "type": "date"},
        {"name": "seq", "type": "int"},
        {"name": "price", "type": "decimal(10,2)"},
        {"name": "at", "type": "timestamp"},
        {"name": "ok", "type": "boolean"},
        {"name": "blob", "type": "binary"},
    ],
    primary_key=["tenant", "day", "seq"],
    num_buckets=4,
)


def _row(tenant: str, seq: int, price: str) -> dict:
    return {
        "tenant": tenant,
        "day": "2024-02-29",
        "seq": seq,
        "price": price,
        "at": "2024-02-29T10:00:00+01:00",
        "ok": seq % 2 == 0,
        "blob": "AAE=",
    }


def _key(row: dict) -> tuple:
    return row["tenant"], row["day"], row["seq"]


def test_snapshot_and_log_files_hold_exactly_the_changes(emptied_kv_store):
    client = emptied_kv_store.client()
    client.create_table(SPEC)
    expected: dict[tuple, dict] = {}
    batches = [
        ("upsert", [_row("a", i, f"{i}.10") for i in range(20)]),
        ("upsert", [_row("a", i, f"{i}.99") for i in range(0, 20, 3)] + [_row("b", 1, "7")]),
        (
            "delete",
            [{"tenant": "a", "day": "2024-02-29", "seq": i} for i in range(0, 20, 4)]
            + [{"tenant": "zz", "day": "2024-02-29", "seq": 1}],
        ),  # absent key: no record
        ("upsert", [_row("a", 0, "0.01")]),  # re-insert after delete
    ]
    changes = []  # (key, op) in write order
    for op, rows in batches:
        if op == "upsert":
            client.upsert("events", rows)
            for r in rows:
                changes.append((_key(r), "+U" if _key(r) in expected else "+I"))
                expected[_key(r)] = r
        else:
            client.delete("events", rows)
            for r in rows:
                if _key(r) in expected:
                    changes.append((_key(r), "-D"))
                    del expected[_key(r)]

    snapshots = client.take_snapshots("events")
    assert sorted(s.bucket for s in snapshots.buckets) == [0, 1, 2, 3]
    live = {}
    for snap in snapshots.buckets:
        data = pq.read_table(snap.files)
        assert data.num_rows == snap.row_count
        assert data.schema.names == [c.name for c in SPEC.columns] + ["__offset", "__timestamp"]
        assert data.schema.field("price").type == pa.decimal128(10, 2)
        assert data.schema.field("__timestamp").type == pa.timestamp("us", tz="UTC")
        for r in data.to_pylist():
            key = (r["tenant"], r["day"].isoformat(), r["seq"])
            assert bucket_of(r, SPEC.primary_key, SPEC.num_buckets) == snap.bucket
            live[key] = (r["price"], r["at"], r["blob"], r["ok"])
    assert live == {
        k: (
            decimal.Decimal(r["price"]).quantize(decimal.Decimal("0.01")),
            dt.datetime(2024, 2, 29, 9, tzinfo=UTC),
            b"\x00\x01",
            r["ok"],
        )
        for k, r in expected.items()
    }

    logged = []
    for bucket in client.log_info("events").buckets:
        segments = client.log_segments("events", bucket.bucket, 0, bucket.log_end_offset)
        records = pa.concat_tables(pq.read_table(s.file) for s in segments).to_pylist() if segments else []
        assert [r["__offset"] for r in records] == list(range(bucket.log_end_offset))  # dense, from 0
        assert next(s for s in snapshots.buckets if s.bucket == bucket.bucket).log_offset == bucket.log_end_offset
        for r in records:
            if r["__op"] == "-D":
                assert (r["price"], r["at"], r["ok"]) == (None, None, None)
        logged += [
            (r["__timestamp"], r["__offset"], (r["tenant"], r["day"].isoformat(), r["seq"]), r["__op"]) for r in records
        ]
    assert sorted(changes) == sorted((key, op) for _, _, key, op in logged)
    assert len(logged) == len(changes)


def test_a_million_rows_through_arrow(emptied_kv_store):
    client = emptied_kv_store.client(timeout_s=120)
    client.create_table(
        TableSpec(
            name="big",
            schema=[{"name": "id", "type": "bigint"}, {"name": "v", "type": "double"}],
            primary_key=["id"],
            num_buckets=8,
        )
    )
    n = 1_000_000
    client.write_arrow("big", pa.table({"id": pa.array(range(n), pa.int64()), "v": pa.array(range(n), pa.float64())}))
    client.write_arrow("big", pa.table({"id": pa.array(range(0, n, 10), pa.int64())}), op="delete")
    snapshots = client.take_snapshots("big")
    assert sum(s.row_count for s in snapshots.buckets) == n - n // 10
    assert sum(b.log_end_offset for b in client.log_info("big").buckets) == n + n // 10
    one = pq.read_table(snapshots.buckets[0].files, columns=["id"]).column("id").to_pylist()
    assert all(i % 10 and bucket_of({"id": i}, ["id"], 8) == 0 for i in one)


def test_periodic_snapshots_only_for_changed_buckets(store_factory):
    store = store_factory(snapshot_interval_s=0.2)
    client = store.client()
    client.create_table(TableSpec(name="t", schema=[{"name": "id", "type": "int"}], primary_key=["id"], num_buckets=4))
    client.upsert("t", [{"id": 1}])
    bucket = bucket_of({"id": 1}, ["id"], 4)
    first = wait_until(lambda: client.latest_snapshots("t").buckets, "a periodic snapshot", **STORE_PACE)
    assert [(s.bucket, s.snapshot_id, s.row_count) for s in first] == [(bucket, 1, 1)]
    client.upsert("t", [{"id": 1}])
    wait_until(
        lambda: client.latest_snapshots("t").buckets[0].snapshot_id == 2, "a second periodic snapshot", **STORE_PACE
    )
    assert [(s.bucket, s.log_offset) for s in client.latest_snapshots("t").buckets] == [(bucket, 2)]
    metrics = client.metrics()
    assert 'kvstore_snapshots_taken_total{table="t"} 2.0' in metrics
    assert 'kvstore_rows_written_total{table="t"} 2.0' in metrics


def test_segments_of_several_buckets_come_in_one_call_like_one_each(emptied_kv_store):
    from tiering.kvstore.models import LogRange

    store_client = emptied_kv_store.client()
    store_client.create_table(
        TableSpec.model_validate(
            {"name": "segs", "schema": [{"name": "id", "type": "bigint"}], "primary_key": ["id"], "num_buckets": 2}
        )
    )
    for start in (0, 10, 20):
        store_client.upsert("segs", [{"id": i} for i in range(start, start + 10)])
    ranges = [LogRange(bucket=1, from_offset=3, to_offset=12), LogRange(bucket=0, from_offset=0, to_offset=100)]

    together = store_client.table_segments("segs", ranges)

    assert together == [store_client.log_segments("segs", r.bucket, r.from_offset, r.to_offset) for r in ranges]
    assert all(together)
