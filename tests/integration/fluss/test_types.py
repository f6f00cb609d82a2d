"""Every type a Fluss primary-key table can hold, on a real cluster: the mapped ones read back through
the store seam's reader (the changelog by pyfluss, a KV snapshot by Fluss's Java client) with the
values written, edge values included, in the Arrow types the lake gets; the others are refused at
``table()`` naming table and column. Rows are written by Fluss's Java client
(tests/support/fluss_rows.py): pyfluss cannot write a timestamp before 1970 with a fraction.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from decimal import Decimal

import pyarrow as pa
import pytest

from tests.support.store_sides import SNAPSHOT_WAIT
from tests.support.waiting import wait_until
from tiering.errors import SchemaMismatchError, StoreError
from tiering.kvstore.protocol import OP_COLUMN

pytestmark = pytest.mark.integration

pytest.importorskip("fluss")

from tiering.fluss.store import FlussStore  # noqa: E402  (pyfluss present)

UTC = dt.UTC
#: every mapped type, as Fluss spells it, and the Spark SQL type the lake gets
COLUMNS = {
    "id": ("INT NOT NULL", "int"),
    "flag": ("BOOLEAN", "boolean"),
    "tiny": ("TINYINT", "tinyint"),
    "small": ("SMALLINT", "smallint"),
    "big": ("BIGINT", "bigint"),
    "real": ("FLOAT", "float"),
    "wide": ("DOUBLE", "double"),
    "d18": ("DECIMAL(18,4)", "decimal(18,4)"),
    "d19": ("DECIMAL(19,0)", "decimal(19,0)"),
    "d38": ("DECIMAL(38,10)", "decimal(38,10)"),
    "d5": ("DECIMAL(5,5)", "decimal(5,5)"),
    "code": ("CHAR(5)", "string"),
    "name": ("STRING", "string"),
    "tag": ("BINARY(3)", "binary"),
    "blob": ("BYTES", "binary"),
    "day": ("DATE", "date"),
    "wall0": ("TIMESTAMP(0)", "timestamp_ntz"),
    "wall3": ("TIMESTAMP(3)", "timestamp_ntz"),
    "wall": ("TIMESTAMP", "timestamp_ntz"),
    "at0": ("TIMESTAMP_LTZ(0)", "timestamp"),
    "at3": ("TIMESTAMP_LTZ(3)", "timestamp"),
    "at": ("TIMESTAMP_LTZ", "timestamp"),
}
HIGH = {
    "id": 1,
    "flag": True,
    "tiny": 127,
    "small": 32767,
    "big": 2**63 - 1,
    "real": 3.4028234663852886e38,
    "wide": math.inf,
    "d18": Decimal("99999999999999.9999"),
    "d19": Decimal("9999999999999999999"),
    "d38": Decimal("9999999999999999999999999999.9999999999"),
    "d5": Decimal("0.99999"),
    "code": "abcde",
    "name": "zürich \u00a0\U0001f600",
    "tag": b"\x00\xff\x7f",
    "blob": bytes(range(256)),
    "day": dt.date(9999, 12, 31),
    "wall0": dt.datetime(2026, 11, 28, 13, 14, 15),
    "wall3": dt.datetime(2026, 11, 28, 13, 14, 15, 123000),
    "wall": dt.datetime(2026, 11, 28, 13, 14, 15, 123456),
    "at0": dt.datetime(2026, 11, 28, 13, 14, 15, tzinfo=UTC),
    "at3": dt.datetime(2026, 11, 28, 13, 14, 15, 999000, tzinfo=UTC),
    "at": dt.datetime(2026, 11, 28, 13, 14, 15, 1, tzinfo=UTC),
}
LOW = {
    "id": 2,
    "flag": False,
    "tiny": -128,
    "small": -32768,
    "big": -(2**63),
    "real": -1.401298464324817e-45,
    "wide": -math.inf,
    "d18": Decimal("-99999999999999.9999"),
    "d19": Decimal("-9999999999999999999"),
    "d38": Decimal("-9999999999999999999999999999.9999999999"),
    "d5": Decimal("-0.00001"),
    "code": "a",
    "name": "",
    "tag": b"abc",
    "blob": b"",
    "day": dt.date(1, 1, 1),
    "wall0": dt.datetime(1900, 1, 1, 0, 0, 1),
    "wall3": dt.datetime(1969, 12, 31, 23, 59, 59, 999000),
    "wall": dt.datetime(1969, 12, 31, 23, 59, 59, 123456),
    "at0": dt.datetime(1, 1, 1, tzinfo=UTC),
    "at3": dt.datetime(1960, 6, 1, 12, 0, 0, 1000, tzinfo=UTC),
    "at": dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
}
NULLS = {name: None for name in COLUMNS} | {"id": 3}
ROWS = [HIGH, LOW, NULLS]


def read_back(store: FlussStore, table_name: str) -> tuple[pa.Table, pa.Table]:
    """The table's whole changelog and a snapshot covering it, through the seam's bucket reader."""
    table = store.table(table_name)
    end = store.log_ends([table_name])[table_name].buckets[0].end
    reader = store.bucket_reader()
    try:
        changes = pa.Table.from_batches(list(reader.changelog(table, 0, 0, end)))
        ref = wait_until(
            lambda: (s := store.latest_snapshots(table_name).get(0)) and s.log_offset >= end and s,
            f"a snapshot of {table_name}",
            **SNAPSHOT_WAIT,
        )
        snapshot = pa.Table.from_batches(list(reader.snapshot_rows(table, ref)), table.arrow_schema)
    finally:
        reader.close()
    return changes, snapshot


def test_every_mapped_type_reads_back_as_written_through_the_changelog_and_a_snapshot(writer, store):
    writer.create_table("typed", {name: fluss for name, (fluss, _) in COLUMNS.items()}, ["id"])
    writer.upsert("typed", ROWS)

    changes, snapshot = read_back(store, "typed")

    table = store.table("typed")
    assert {c.name: c.spark_type for c in table.columns} == {name: spark for name, (_, spark) in COLUMNS.items()}
    assert snapshot.schema == table.arrow_schema
    assert changes.select(list(COLUMNS)).schema.types == table.arrow_schema.types
    assert changes.column(OP_COLUMN).to_pylist() == ["+I"] * len(ROWS)
    assert changes.select(list(COLUMNS)).to_pylist() == ROWS
    assert sorted(snapshot.to_pylist(), key=lambda r: r["id"]) == ROWS
    assert writer.current_rows("typed") == ROWS


@pytest.mark.xfail(
    strict=True,
    raises=StoreError,
    reason="pyfluss 1.0 reads no timestamp past 9999-12-30T22:00 from a changelog (its time library's range)",
)
def test_a_timestamp_late_in_the_year_9999_reads_back_through_the_changelog(writer, store):
    last = dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
    writer.create_table("late", {"id": "INT NOT NULL", "wall": "TIMESTAMP(6)"}, ["id"])
    writer.upsert("late", [{"id": 1, "wall": last}])

    changes, snapshot = read_back(store, "late")

    assert changes.column("wall").to_pylist() == snapshot.column("wall").to_pylist() == [last]


@pytest.mark.parametrize(
    ("fluss_type", "spelled", "why"),
    [
        ("ARRAY<INT>", "array<int>", "no lossless Spark type"),
        ("MAP<STRING, INT>", "map<string NOT NULL,int>", "no lossless Spark type"),
        ("ROW<a INT>", "row<a: int>", "no lossless Spark type"),
        ("TIME(3)", "time(3)", "Delta Lake has no time type"),
        ("TIMESTAMP(9)", "timestamp(9)", "Spark keeps microseconds"),
        ("TIMESTAMP_LTZ(9)", "timestamp_ltz(9)", "Spark keeps microseconds"),
    ],
)
def test_a_primary_key_table_with_a_type_the_lake_cannot_keep_is_refused_naming_table_and_column(
    writer, store, fluss_type, spelled, why
):
    name = "odd_" + "".join(c for c in spelled.lower() if c.isalnum())
    writer.create_table(name, {"id": "INT NOT NULL", "odd": fluss_type}, ["id"])

    expected = rf"table '{name}': column 'odd' is {re.escape(spelled)}: {why}"
    with pytest.raises(SchemaMismatchError, match=expected) as refused:
        store.table(name)

    assert refused.value.table == name
