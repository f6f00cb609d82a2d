"""The test helpers of tests/support/fluss_rows.py against a real Fluss cluster: the oracle sees an
upsert, an update and a delete in every bucket and agrees with the KV lookup; a table re-created is
a new, empty table; a column added reads null in the rows written before it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.support.fluss_rows import FlussRows

pytestmark = pytest.mark.integration

pytest.importorskip("fluss")

COLUMNS = {"region": "STRING NOT NULL", "id": "BIGINT NOT NULL", "amount": "DECIMAL(12,2)", "note": "STRING"}
KEY = ["region", "id"]


@pytest.fixture(scope="module")
def rows(fluss_cluster) -> Iterator[FlussRows]:
    made = FlussRows(fluss_cluster.bootstrap_servers, f"rows_{uuid.uuid4().hex[:8]}")
    yield made
    made.close()


def row(region: str, key: int, note: str | None = None) -> dict:
    return {"region": region, "id": key, "amount": None, "note": note}


def test_the_oracle_sees_an_update_and_a_delete_in_every_bucket_and_agrees_with_lookups(rows):
    rows.create_table("orders", COLUMNS, KEY, buckets=3)
    written = [row(region, key, "first") for region in ("eu", "us") for key in range(10)]
    rows.upsert("orders", written)
    rows.upsert("orders", [row("eu", 3, "second"), row("us", 9, "second")])
    rows.delete("orders", [{"region": "us", "id": 0}, {"region": "eu", "id": 7}])

    current = rows.current_rows("orders")

    gone = [("us", 0), ("eu", 7)]
    updated = {("eu", 3), ("us", 9)}
    expected = sorted(
        (row(r["region"], r["id"], "second" if (r["region"], r["id"]) in updated else "first") for r in written),
        key=lambda r: (r["region"], r["id"]),
    )
    expected = [r for r in expected if (r["region"], r["id"]) not in gone]
    assert current == expected
    keys = [{"region": r["region"], "id": r["id"]} for r in written]
    looked_up = [found for found in rows.lookup("orders", keys) if found is not None]
    assert sorted(looked_up, key=lambda r: (r["region"], r["id"])) == current


def test_a_table_re_created_is_a_new_empty_table(rows):
    first = rows.create_table("again", COLUMNS, KEY)
    rows.upsert("again", [row("eu", 1, "old")])

    second = rows.recreate_table("again", COLUMNS, KEY)

    assert second != first
    assert rows.current_rows("again") == []
    rows.upsert("again", [row("eu", 2, "new")])
    assert rows.current_rows("again") == [row("eu", 2, "new")]


def test_a_column_added_reads_null_in_the_rows_written_before_it(rows):
    rows.create_table("grown", COLUMNS, KEY)
    rows.upsert("grown", [row("eu", 1, "before")])

    rows.add_column("grown", "score", "INT")
    rows.upsert("grown", [row("eu", 2, "after") | {"score": 7}])

    assert rows.current_rows("grown") == [
        row("eu", 1, "before") | {"score": None},
        row("eu", 2, "after") | {"score": 7},
    ]


def test_a_log_table_has_no_current_rows(rows):
    rows.create_table("events", {"id": "BIGINT", "note": "STRING"}, None)

    with pytest.raises(AssertionError, match="'events' has no primary key"):
        rows.current_rows("events")
