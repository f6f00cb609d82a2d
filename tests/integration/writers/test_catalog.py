"""Tiered tables registered in the Spark session catalog (``lake.catalog_database``): another
session reads ``db.t`` as the lake and the store hold it; registration is once per term, a
re-created table re-points its entry, and a registration that fails fails nothing else.

The catalog cases need Delta's jars and catalog in the session (scripts/test_delta.sh); without
them the setting must be refused before anything is written. The shared test session's catalog is
in memory; the Hive metastore's case is test_catalog_hive.py's.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import shutil
from decimal import Decimal

import pytest
from pydantic import ValidationError

from tests.support.store_files import ts, write_log, write_snapshot
from tests.support.writers import JOB, ORDERS, commit, missing_delta_jars, orders_rows, row, skip_without_delta_jars
from tiering.conf.model import LakeConfig
from tiering.enumerator.splits import LogSplit, SnapshotSplit
from tiering.errors import ConfigError
from tiering.writers.catalog import TableCatalog
from tiering.writers.choice import make_round_writer

pytestmark = pytest.mark.integration

#: a reserved word: registered only when quoted
ORDER = dataclasses.replace(ORDERS, name="order")


def catalog_rows(spark, name: str) -> dict[int, tuple]:
    """``orders_rows`` of the catalog's table ``name``, read in a session of its own."""
    rows = spark.newSession().table(name).collect()
    return {
        r["id"]: (r["__bucket"], r["name"], r["price"], r["__offset"], r["__timestamp"].astimezone(dt.UTC))
        for r in rows
    }


@pytest.mark.parametrize("database", ["tiered db", "tiered.db", "`x`", ""])
def test_a_database_name_the_catalog_cannot_hold_is_refused_when_the_config_loads(tmp_path, database):
    with pytest.raises(ValidationError, match="catalog_database"):
        LakeConfig(root=str(tmp_path / "lake"), catalog_database=database)


def test_without_the_jars_a_catalog_database_is_refused_naming_what_is_missing(spark, tmp_path):
    if missing_delta_jars(spark) is None:
        pytest.skip("the Delta jars are on the classpath")
    config = LakeConfig(root=str(tmp_path / "lake"), catalog_database="tiered")

    with pytest.raises(ConfigError) as err:
        make_round_writer(spark, config, JOB)

    (problem,) = err.value.problems
    assert problem.startswith("lake.catalog_database = 'tiered' needs the Delta Lake jars on Spark's classpath")
    assert "io.delta.tables.DeltaTable" in problem and problem.endswith("leave lake.catalog_database unset")
    assert not (tmp_path / "lake").exists()


@pytest.mark.delta_jars
@pytest.mark.parametrize("kind", ["delta-rs", "delta-spark"])
def test_a_tiered_table_is_registered_once_and_another_session_reads_the_lake(spark, tmp_path, caplog, kind):
    skip_without_delta_jars(spark)
    database = f"tiered_{kind.replace('-', '_')}"
    writer = make_round_writer(
        spark,
        LakeConfig(root=str(tmp_path / "lake"), writer=kind, catalog_database=database, delta_spark_single_driver=True),
        JOB,
    )
    registrations = []
    register = TableCatalog._register
    writer.catalog._register = lambda table, recreated: (
        registrations.append(table),
        register(writer.catalog, table, recreated),
    )
    name = f"{database}.`order`"
    snap = write_snapshot(tmp_path / "s", ORDER, [(row(1, "a"), 0), (row(2, "b"), 1)])
    commit(writer, {SnapshotSplit("order", 0, 1, snapshot_id=1, log_offset=2): [snap]}, table=ORDER)
    log = write_log(
        tmp_path / "l", ORDER, [(2, "+U", row(1, "a2", "2.50")), (3, "-D", {"id": 2}), (4, "+I", row(3, "c"))]
    )
    commit(writer, {LogSplit("order", 0, 1, 2, 5): [log]}, table=ORDER, round_id=2)

    expected = {1: (0, "a2", Decimal("2.50"), 2, ts(2)), 3: (0, "c", Decimal("1.00"), 4, ts(4))}
    assert orders_rows(writer.lake, "order") == expected
    assert catalog_rows(spark, name) == expected
    assert registrations == ["order"], "once per term"

    # an entry that points elsewhere is left as it is, with a warning; the round still commits
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(tmp_path / "lake" / "order", elsewhere)  # a copy: Delta re-points only to the same schema
    spark.sql(f"ALTER TABLE {name} SET LOCATION '{elsewhere}'")
    fresh = make_round_writer(
        spark,
        LakeConfig(root=str(tmp_path / "lake"), writer=kind, catalog_database=database, delta_spark_single_driver=True),
        JOB,
    )
    log = write_log(tmp_path / "m", ORDER, [(5, "+I", row(4, "d"))])
    with caplog.at_level(logging.WARNING, logger="tiering.writers.catalog"):
        result = commit(fresh, {LogSplit("order", 0, 1, 5, 6): [log]}, table=ORDER, epoch=2)
    assert not result.skipped and set(orders_rows(fresh.lake, "order")) == {1, 3, 4}
    assert f"table=order: not registered as `{database}`.`order` in the session catalog" in caplog.text
    assert "not at the lake's" in caplog.text
    assert catalog_rows(spark, name) == expected, "the entry still reads the copy"

    # the upstream table re-created: its round replaces the Delta table and re-points the entry
    recreated = dataclasses.replace(ORDER, table_id=2)
    snap = write_snapshot(tmp_path / "r", recreated, [(row(7, "new"), 0)])
    commit(
        fresh,
        {SnapshotSplit("order", 0, 2, snapshot_id=1, log_offset=1): [snap]},
        table=recreated,
        epoch=2,
        round_id=2,
        replace_table=True,
    )
    assert catalog_rows(spark, name) == orders_rows(fresh.lake, "order") == {7: (0, "new", Decimal("1.00"), 0, ts(0))}


@pytest.mark.delta_jars
def test_a_name_the_catalog_refuses_is_a_warning_and_the_round_commits(spark, tmp_path, caplog):
    skip_without_delta_jars(spark)
    table = dataclasses.replace(ORDERS, name="or-ders")
    writer = make_round_writer(spark, LakeConfig(root=str(tmp_path / "lake"), catalog_database="tiered_refused"), JOB)
    snap = write_snapshot(tmp_path / "s", table, [(row(1, "a"), 0)])

    with caplog.at_level(logging.WARNING, logger="tiering.writers.catalog"):
        result = commit(writer, {SnapshotSplit("or-ders", 0, 1, snapshot_id=1, log_offset=1): [snap]}, table=table)

    assert not result.skipped and orders_rows(writer.lake, "or-ders") == {1: (0, "a", Decimal("1.00"), 0, ts(0))}
    assert "table=or-ders: not registered as `tiered_refused`.`or-ders` in the session catalog" in caplog.text
    assert "is not a valid name" in caplog.text
