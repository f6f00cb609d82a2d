"""Request validation and the snapshot merge of the reference store, without running it."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tiering.kvstore.models import LogSegment, Snapshot, TableInfo
from tiering.kvstore.server import rows
from tiering.kvstore.server.errors import ApiError
from tiering.kvstore.server.files import live_state, log_schema, snapshot_schema

pytestmark = pytest.mark.unit

INFO = TableInfo(
    name="t",
    table_id=1,
    num_buckets=2,
    primary_key=["id"],
    schema=[
        {"name": "id", "type": "bigint"},
        {"name": "d", "type": "decimal(5,2)"},
        {"name": "at", "type": "timestamp"},
        {"name": "n", "type": "tinyint"},
    ],
)


def _arrow(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write(table)
    return sink.getvalue().to_pybytes()


def test_json_rows_convert_to_the_column_types():
    data = rows.from_json(INFO, "upsert", [{"id": 1, "d": "1.5", "at": "2024-01-01T00:00:00"}, {"id": 2, "n": -128}])
    assert data.schema == pa.schema(
        [("id", pa.int64()), ("d", pa.decimal128(5, 2)), ("at", pa.timestamp("us", tz="UTC")), ("n", pa.int8())]
    )
    assert data.to_pylist()[0] == {
        "id": 1,
        "d": decimal.Decimal("1.50"),
        "at": dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
        "n": None,
    }


@pytest.mark.parametrize(
    ("op", "row", "message"),
    [
        ("upsert", {"id": True}, "rows[0].id: expected bigint, got boolean True"),
        ("upsert", {"id": 1, "n": 128}, "rows[0].n: 128 is out of range for tinyint"),
        ("upsert", {"id": 1, "d": "1.234"}, "rows[0].d: '1.234' does not fit decimal(5,2): 3 digits after the point"),
        ("upsert", {"id": 1, "d": 12345.6}, "rows[0].d: 12345.6 does not fit decimal(5,2): 5 digits before the point"),
        ("upsert", {"id": 1, "d": "NaN"}, "rows[0].d: 'NaN' is not a finite decimal number"),
        ("upsert", {"id": 1, "at": "yesterday"}, "rows[0].at: Invalid isoformat string"),
        ("upsert", {"id": 1, "x": 1}, "rows[0].x: not a column of the table"),
        ("delete", {"id": 1, "n": 1}, "rows[0].n: delete rows carry primary-key columns only"),
        ("delete", {"id": None}, "rows[0].id: primary-key column must not be null"),
    ],
)
def test_json_errors_name_the_field(op, row, message):
    with pytest.raises(ApiError) as raised:
        rows.from_json(INFO, op, [row])
    assert raised.value.status == 400 and message in raised.value.message


def test_arrow_widens_without_loss_and_fills_missing_columns_with_null():
    data = rows.from_arrow(
        INFO, "upsert", _arrow(pa.table({"id": pa.array([1], pa.int32()), "n": pa.array([5], pa.int64())}))
    )
    assert data.schema.field("id").type == pa.int64() and data.to_pylist() == [{"id": 1, "d": None, "at": None, "n": 5}]
    with pytest.raises(ApiError) as raised:
        rows.from_arrow(INFO, "upsert", _arrow(pa.table({"id": [1], "n": pa.array([300], pa.int64())})))
    assert "column 'n': cannot convert int64 to tinyint without loss" in raised.value.message


def test_live_state_applies_log_on_snapshot(tmp_path):
    ts = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    tstype = pa.timestamp("us", tz="UTC")
    base = pa.table(
        {
            "id": [1, 2],
            "d": pa.nulls(2, pa.decimal128(5, 2)),
            "at": pa.nulls(2, tstype),
            "n": pa.array([1, 2], pa.int8()),
            "__offset": [0, 1],
            "__timestamp": pa.array([ts, ts], tstype),
        },
        schema=snapshot_schema(INFO),
    )
    pq.write_table(base, tmp_path / "snap.parquet")
    log = pa.table(
        {
            "id": [2, 3, 1, 3],
            "d": pa.nulls(4, pa.decimal128(5, 2)),
            "at": pa.nulls(4, pa.timestamp("us", tz="UTC")),
            "n": pa.array([20, 3, None, 30], pa.int8()),
            "__offset": [2, 3, 4, 5],
            "__op": ["+U", "+I", "-D", "+U"],
            "__timestamp": pa.array([ts] * 4, pa.timestamp("us", tz="UTC")),
        },
        schema=log_schema(INFO),
    )
    pq.write_table(log, tmp_path / "log.parquet")
    snap = Snapshot(
        bucket=0, snapshot_id=1, log_offset=2, files=[str(tmp_path / "snap.parquet")], row_count=2, size_bytes=1
    )
    state = live_state(INFO, snap, [LogSegment(start_offset=2, end_offset=6, file=str(tmp_path / "log.parquet"))])
    assert sorted((r["id"], r["n"], r["__offset"]) for r in state.to_pylist()) == [(2, 20, 2), (3, 30, 5)]
    assert state.schema == snapshot_schema(INFO)
