"""The round writers under test, by data path, and the ``orders`` table their tests commit.

Every writer runs the same round protocol tests (docs/DESIGN.md §6: "same protocol, same tests"); a
test names one data path only when it tests that path.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from tests.support.tables import kv_table
from tiering.conf.defaults import DEFAULT_DRIVER_MAX_CHANGES
from tiering.delta_log.lake import Lake
from tiering.enumerator.splits import sort_key
from tiering.errors import ConfigError
from tiering.writers.delta_jars import check_delta_jars

#: Every writer, by data path: (id, driver_max_changes for delta-rs).
WRITERS = [
    ("delta-rs-executors", 0),
    ("delta-rs-driver", DEFAULT_DRIVER_MAX_CHANGES),
    ("delta-rs-feed", DEFAULT_DRIVER_MAX_CHANGES),
    ("delta-spark", None),
]


def writer_params(*read_by_spark: str) -> list:
    """``WRITERS``' ids as fixture params: delta-spark's, and those of ``read_by_spark`` (tables of
    delta-rs that Spark's Delta reads too), marked ``delta_jars`` (scripts/test_delta.sh runs those)."""
    marked = {"delta-spark", *read_by_spark}
    return [pytest.param(k, marks=pytest.mark.delta_jars) if k in marked else k for k, _ in WRITERS]


WRITER_PARAMS = writer_params()

#: The ``lake.writer`` values as params of a job test (tests/integration/conftest.py ``lake_writer``).
LAKE_WRITERS = ["delta-rs", pytest.param("delta-spark", marks=pytest.mark.delta_jars)]
#: Who writes a changelog-only round's files, by writer.
WRITTEN_BY = {
    "delta-rs-executors": "executors",
    "delta-rs-driver": "driver",
    "delta-rs-feed": "driver (MERGE)",
    "delta-spark": "delta-spark (MERGE)",
}

JOB = "test-job"
ORDERS = kv_table({"id": "bigint", "name": "string", "price": "decimal(10,2)"}, name="orders", num_buckets=4)


def row(i: int, name: str, price: str = "1.00") -> dict:
    return {"id": i, "name": name, "price": Decimal(price)}


def orders_rows(lake: Lake, table: str = "orders") -> dict[int, tuple]:
    """id -> (bucket, name, price, offset, timestamp) of an ``ORDERS``-shaped table, read with
    delta-rs; duplicates fail."""
    data = lake.load(table).to_arrow().to_pylist()
    out = {r["id"]: (r["__bucket"], r["name"], r["price"], r["__offset"], r["__timestamp"]) for r in data}
    assert len(out) == len(data), "duplicate keys in the lake"
    return out


def missing_delta_jars(spark) -> str | None:
    """Why delta-spark cannot run here, or None."""
    try:
        check_delta_jars(spark)
    except ConfigError as e:
        return e.problems[0]
    return None


def skip_without_delta_jars(spark) -> None:
    """Skip the test unless delta-spark can run in ``spark``."""
    if missing_delta_jars(spark) is not None:
        pytest.skip(
            "delta-spark not executable here: the Delta jars are not on Spark's classpath "
            "(io.delta.tables.DeltaTable is not loadable; scripts/test_delta.sh runs these)"
        )


def commit(writer, files, *, epoch=1, round_id=1, table=ORDERS, replace_table=False):
    """One table round of ``files`` (split -> its files) through ``writer``."""
    current = writer._lake.load(table.name)
    return writer.write_table_round(
        table,
        sorted(files, key=sort_key),
        files,
        current,
        epoch=epoch,
        round_id=round_id,
        lease_id="lease-1",
        replace_table=replace_table,
    )


def log_entry(lake: Lake, version: int, table: str = "orders") -> dict[str, list[dict]]:
    """The actions of one Delta log entry by kind, read from the ``_delta_log`` JSON itself."""
    store = lake.store
    with store.filesystem.open_input_stream(store.path(f"{lake.path(table)}/_delta_log/{version:020d}.json")) as f:
        actions = [json.loads(line) for line in f.read().decode().splitlines()]
    by_kind: dict[str, list[dict]] = {}
    for action in actions:
        ((kind, body),) = action.items()
        by_kind.setdefault(kind, []).append(body)
    return by_kind
