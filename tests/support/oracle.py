"""The test's own record of a table, and the lake compared with it row by row.

The oracle is the test's own record of every upsert and delete it sent, keyed by primary key:
an independent truth to compare the lake with (not the store's files, which the service itself
reads). A lake table with a duplicate key or without its system columns fails every comparison.
The lake is read with delta-rs and, in a run with Delta's jars (``scripts/test_delta.sh``), with
Spark's own Delta reader too (:mod:`tests.support.delta_spark`): rows, columns, recent versions.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from deltalake.exceptions import TableNotFoundError

from tests.support.delta_spark import assert_versions_read_alike, delta_reader
from tiering.delta_log.lake import Lake
from tiering.kvstore.client import KvStoreClient
from tiering.kvstore.models import TableSpec
from tiering.ops.verify import check_table

SCHEMA = [
    {"name": "id", "type": "bigint"},
    {"name": "name", "type": "string"},
    {"name": "amount", "type": "double"},
    {"name": "qty", "type": "int"},
]
SYSTEM = ("__bucket", "__offset", "__timestamp")


class TableOracle:
    """A KV table in the store plus the test's own record of what it should hold."""

    def __init__(self, client: KvStoreClient, name: str, num_buckets: int = 4, seed: int = 0) -> None:
        self.client = client
        self.name = name
        self.rows: dict[int, dict] = {}
        self.rng = random.Random(f"{name}-{seed}")
        self.info = client.create_table(
            TableSpec.model_validate(
                {"name": name, "schema": SCHEMA, "primary_key": ["id"], "num_buckets": num_buckets}
            )
        )
        self.added: list[str] = []

    def add_column(self, name: str, type: str) -> None:
        """Append a nullable column upstream: the rows written so far hold null in it."""
        self.info = self.client.add_column(self.name, name, type)
        self.added.append(name)
        for row in self.rows.values():
            row[name] = None

    def upsert(self, ids, **added: Callable[[int], Any]) -> None:
        """Upsert ``ids``; an added column gets ``added[column](id)``, or null when not given
        (an upsert replaces the whole row)."""
        rows = [
            {
                "id": i,
                "name": f"{self.name}-{i}-{self.rng.randrange(10**6)}",
                "amount": self.rng.random() * 100,
                "qty": self.rng.randrange(1000),
                **{c: value(i) for c, value in added.items()},
            }
            for i in ids
        ]
        self.client.upsert(self.name, rows)
        self.rows.update({r["id"]: {**dict.fromkeys(self.added), **r} for r in rows})

    def delete(self, ids) -> None:
        ids = list(ids)
        self.client.delete(self.name, [{"id": i} for i in ids])
        for i in ids:
            self.rows.pop(i, None)

    def churn(self, n: int, key_space: int) -> None:
        """A realistic mix: inserts, updates of existing keys, deletes."""
        self.upsert(self.rng.sample(range(key_space), n))
        if self.rows:
            self.delete(self.rng.sample(sorted(self.rows), max(1, n // 5)))


def lake_rows(lake: Lake | Path, table: str) -> dict[int, dict]:
    """The lake table's user rows keyed by id (system columns checked, then dropped); ``lake``
    is a :class:`Lake` (any storage) or a local root."""
    loaded = (lake if isinstance(lake, Lake) else Lake.at(str(lake))).load(table)
    assert loaded is not None, f"no lake table {table}"
    data = loaded.to_arrow().to_pylist()
    rows: dict[int, dict] = {}
    for row in data:
        assert all(c in row for c in SYSTEM), f"system columns missing in {table}: {sorted(row)}"
        assert row["id"] not in rows, f"duplicate key {row['id']} in lake table {table}"
        rows[row["id"]] = {k: v for k, v in row.items() if k not in SYSTEM}
    return rows


def assert_lake_equals(lake_root: Lake | Path, oracle: TableOracle) -> None:
    """The lake table equals the oracle row by row as delta-rs reads it and, with Delta's jars on
    the test's Spark session, as Spark's Delta reader reads it (its columns too, and its recent
    versions as delta-rs reads them)."""
    lake = lake_root if isinstance(lake_root, Lake) else Lake.at(str(lake_root))
    _assert_rows_equal(lake_rows(lake, oracle.name), oracle, "delta-rs")
    reader = delta_reader(lake)
    if reader is None:
        return
    columns = set(reader.columns(lake, oracle.name))
    assert columns == {c["name"] for c in SCHEMA} | set(oracle.added) | set(SYSTEM), (
        f"Spark reads {oracle.name}'s columns as {columns}"
    )
    _assert_rows_equal(reader.rows(lake, oracle.name, drop=SYSTEM), oracle, "Spark's Delta reader")
    assert_versions_read_alike(reader, lake, oracle.name)


def _assert_rows_equal(lake: dict[int, dict], oracle: TableOracle, reader: str) -> None:
    missing = sorted(set(oracle.rows) - set(lake))
    extra = sorted(set(lake) - set(oracle.rows))
    wrong = sorted(k for k in set(lake) & set(oracle.rows) if lake[k] != oracle.rows[k])
    assert not (missing or extra or wrong), (
        f"{oracle.name} read by {reader}: {len(missing)} missing {missing[:5]}, {len(extra)} extra {extra[:5]}, "
        f"{len(wrong)} differ {[(k, lake[k], oracle.rows[k]) for k in wrong[:3]]}"
    )


def assert_equal_to_store(client: KvStoreClient, lake: Lake, *tables: TableOracle) -> None:
    """The lake equals the test's own record and a snapshot the store takes now, column by column."""
    for table in tables:
        assert_lake_equals(lake, table)
        check = check_table(client, lake, client.get_table(table.name))
        assert check.equal, check


def assert_lakes_equal(lake_root: Lake | Path, tables: Iterable[TableOracle]) -> None:
    for table in tables:
        assert_lake_equals(lake_root, table)


def lake_matches(lake_root: Lake | Path, oracle: TableOracle) -> bool:
    """Whether the lake equals the oracle now (a table not created yet does not), as delta-rs
    reads it: a test polls it."""
    try:
        _assert_rows_equal(lake_rows(lake_root, oracle.name), oracle, "delta-rs")
    except (AssertionError, TableNotFoundError):
        return False
    return True


def assert_no_duplicates(lake_root: Path, tables: Iterable[TableOracle]) -> None:
    """Holds at any time, even right after a kill: one row per key (lake_rows asserts it)."""
    for table in tables:
        if (lake_root / table.name / "_delta_log").exists():
            lake_rows(lake_root, table.name)
