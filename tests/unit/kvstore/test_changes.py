"""Applying a bucket's changes to key-sorted rows: the splice (zero-copy slices of the base with
the upserts in their keys' places) gives exactly the rows, in exactly the order, of the filter
and the sort, and declines whatever it cannot splice."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiering.kvstore.contract.changes import apply_changes, apply_sorted, newest_per_key, splice_changes
from tiering.kvstore.protocol import DELETE, INSERT, OFFSET_COLUMN, OP_COLUMN, OPS, UPDATE

pytestmark = pytest.mark.unit

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), (OFFSET_COLUMN, pa.int64())])
CHANGES = SCHEMA.append(pa.field(OP_COLUMN, pa.string()))
KEY = ["id"]
#: Keys from a narrow range (changes hit base keys and the gaps between them) and the extremes.
KEYS = st.integers(-40, 40) | st.sampled_from([-(2**63), 2**63 - 1])


def base(keys: list[int], batches: int = 1) -> pa.Table:
    """Rows of ``keys`` in that order, as ``batches`` chunks (a group of files reads as several)."""
    table = pa.table({"id": keys, "v": [f"base-{k}" for k in keys], OFFSET_COLUMN: range(len(keys))}, schema=SCHEMA)
    size = -(-len(keys) // batches) if keys else 1
    return pa.Table.from_batches(table.to_batches(max_chunksize=size), SCHEMA)


def changes(ops: list[tuple[int, str]]) -> pa.Table:
    """``ops`` (key, op) in log order, offsets after the base's; a delete's value is null."""
    return pa.table(
        {
            "id": [k for k, _ in ops],
            "v": [None if op == DELETE else f"change-{i}" for i, (_, op) in enumerate(ops)],
            OFFSET_COLUMN: [1000 + i for i in range(len(ops))],
            OP_COLUMN: [op for _, op in ops],
        },
        schema=CHANGES,
    )


def sorted_rows(rows: pa.Table, newest: pa.Table | None) -> pa.Table:
    """The sort path: the base without the changed keys, the upserts, sorted by key."""
    return pa.Table.from_batches(apply_changes(rows.to_batches(), newest, KEY, SCHEMA), SCHEMA).sort_by("id")


def rows(table: pa.Table) -> list[tuple]:
    return list(zip(*(table.column(n).to_pylist() for n in SCHEMA.names), strict=False))


@settings(max_examples=300, database=None)
@given(
    keys=st.lists(KEYS, unique=True, max_size=40).map(sorted),
    batches=st.integers(1, 3),
    data=st.data(),
)
def test_the_splice_gives_the_sort_paths_rows_in_its_order(keys, batches, data):
    # upserts and deletes of base keys and of absent ones, several per key at times
    changed = st.sampled_from(keys) | KEYS if keys else KEYS
    ops = data.draw(st.lists(st.tuples(changed, st.sampled_from(OPS)), max_size=30))
    table, newest = base(keys, batches), newest_per_key(changes(ops), KEY)

    spliced = splice_changes(table, newest, KEY, SCHEMA, rows_per_cut=1)

    assert spliced is not None
    assert rows(spliced) == rows(sorted_rows(table, newest))
    assert rows(apply_sorted(table, newest, KEY, SCHEMA)) == rows(spliced)


@pytest.mark.parametrize(
    "ops, expected",
    [
        pytest.param([(-5, INSERT), (3, UPDATE)], [-5, 1, 2, 3, 4], id="before-the-first-key"),
        pytest.param([(9, INSERT), (4, DELETE)], [1, 2, 3, 9], id="after-the-last-key"),
        pytest.param([(k, DELETE) for k in (4, 2, 1, 3)], [], id="every-row-deleted"),
        pytest.param([(2, DELETE), (7, DELETE), (3, UPDATE)], [1, 3, 4], id="a-delete-of-an-absent-key"),
        pytest.param([(3, DELETE), (3, INSERT)], [1, 2, 3, 4], id="deleted-then-upserted"),
    ],
)
def test_edges_of_a_sorted_base(ops, expected):
    table, newest = base([1, 2, 3, 4]), newest_per_key(changes(ops), KEY)

    spliced = splice_changes(table, newest, KEY, SCHEMA, rows_per_cut=1)

    assert spliced is not None and spliced.column("id").to_pylist() == expected
    assert rows(spliced) == rows(sorted_rows(table, newest))


def test_an_empty_base_gets_the_upserts_sorted():
    newest = newest_per_key(changes([(5, INSERT), (-1, INSERT), (2, DELETE)]), KEY)

    spliced = splice_changes(base([]), newest, KEY, SCHEMA)

    assert spliced is not None and spliced.column("id").to_pylist() == [-1, 5]
    assert rows(spliced) == rows(sorted_rows(base([]), newest))


def test_a_sorted_base_without_changes_is_returned_as_it_is():
    table = base([1, 2, 3])
    assert splice_changes(table, None, KEY, SCHEMA) is table


@pytest.mark.parametrize("keys", [[1, 3, 2, 4], [2, 1], [1, 2, 3, 0]], ids=["middle", "two", "last"])
def test_an_unsorted_base_falls_back_to_the_sort(keys):
    table, newest = base(keys), newest_per_key(changes([(3, UPDATE), (5, INSERT), (1, DELETE)]), KEY)

    assert splice_changes(table, newest, KEY, SCHEMA, rows_per_cut=1) is None
    assert rows(apply_sorted(table, newest, KEY, SCHEMA)) == rows(sorted_rows(table, newest))
    assert apply_sorted(table, newest, KEY, SCHEMA).column("id").to_pylist() == sorted(set(keys) - {1} | {3, 5})


def test_more_cuts_than_the_rows_allow_fall_back_to_the_sort():
    table, newest = base(list(range(0, 40, 2))), newest_per_key(changes([(k, INSERT) for k in (5, 15, 25)]), KEY)

    assert splice_changes(table, newest, KEY, SCHEMA, rows_per_cut=10) is None  # 20 rows: 2 cuts, 3 asked
    assert splice_changes(table, newest, KEY, SCHEMA, rows_per_cut=5) is not None
    assert rows(apply_sorted(table, newest, KEY, SCHEMA)) == rows(sorted_rows(table, newest))


def test_adjacent_changes_take_one_cut():
    table, newest = base(list(range(20))), newest_per_key(changes([(k, UPDATE) for k in range(5, 15)]), KEY)

    spliced = splice_changes(table, newest, KEY, SCHEMA, rows_per_cut=10)  # 20 rows: 2 cuts

    assert spliced is not None and rows(spliced) == rows(sorted_rows(table, newest))


def test_what_is_not_one_integer_key_without_nulls_is_not_spliced():
    newest = newest_per_key(changes([(1, UPDATE)]), KEY)
    composite = base([1, 2]).append_column("k2", pa.array([1, 1], pa.int64()))
    named = pa.table({"id": ["a", "b"], "v": ["x", "y"], OFFSET_COLUMN: [0, 1]})
    nulls = pa.table({"id": pa.array([None, 1], pa.int64()), "v": ["x", "y"], OFFSET_COLUMN: [0, 1]}, schema=SCHEMA)

    assert splice_changes(composite, newest, ["id", "k2"], SCHEMA, rows_per_cut=1) is None
    assert splice_changes(named, newest, KEY, SCHEMA, rows_per_cut=1) is None
    assert splice_changes(nulls, newest, KEY, SCHEMA, rows_per_cut=1) is None


def test_a_change_without_its_kind_is_applied_as_the_sort_path_does():
    """The protocol has no null ``__op``; should one come, both paths agree on it (the key's base
    row goes, nothing replaces it) instead of the splice failing where the sort does not."""
    table = base([1, 2, 3])
    newest = newest_per_key(changes([(2, UPDATE)]).set_column(3, OP_COLUMN, pa.array([None], pa.string())), KEY)

    assert splice_changes(table, newest, KEY, SCHEMA, rows_per_cut=1) is None
    assert rows(apply_sorted(table, newest, KEY, SCHEMA)) == rows(sorted_rows(table, newest))
    assert [r[0] for r in rows(apply_sorted(table, newest, KEY, SCHEMA))] == [1, 3]
