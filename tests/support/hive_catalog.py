"""A Hive metastore case of ``lake.catalog_database``, run as its own processes.

The rest of the suite shares one Spark session whose catalog lives in memory: an entry there
proves nothing about what another session, on another JVM, finds. Here a writer process
(``python -m tests.support.hive_catalog write DIR``) tiers ``orders`` with a session on an
embedded Derby metastore under ``DIR``, and a reader process (``... read DIR``) opens the same
metastore afterwards (embedded Derby admits one JVM at a time, so one after the other) and reads
``spark.table("tiered.orders")``. Each prints its result as one JSON line after :data:`RESULT`.

The writer's scenario: two rounds (a snapshot, then updates, a delete and an insert); the entry is
then pointed at a copy of the table, as an entry left from before a re-creation would be; the
table is re-created upstream and its round re-points the entry. The reader must read the
re-created table: the rows of the copy would mean the entry was not re-pointed, none at all that
the registration did not reach the metastore.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

from tests.support.delta_spark import delta_spark_conf
from tests.support.store_files import write_log, write_snapshot
from tests.support.writers import JOB, ORDERS, commit, row
from tiering.conf.model import LakeConfig
from tiering.delta_log.lake import Lake
from tiering.enumerator.splits import LogSplit, SnapshotSplit
from tiering.writers.catalog import TableCatalog
from tiering.writers.choice import make_round_writer

#: The line prefix of a process's result.
RESULT = "hive-catalog-result: "
DATABASE = "tiered"
#: The re-created table's store rows: id -> (name, price, offset).
RECREATED = {7: ("new", "1.00", 0), 8: ("newer", "2.00", 1)}
_REPO = Path(__file__).resolve().parents[2]


def hive_session(directory: Path):
    """A local session whose catalog is Hive's, on an embedded Derby metastore in ``directory``."""
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[1]")
        .appName("kv-tiering-hive-catalog")
        .config("spark.sql.catalogImplementation", "hive")
        .config("spark.sql.warehouse.dir", str(directory / "warehouse"))
        .config(
            "spark.hadoop.javax.jdo.option.ConnectionURL",
            f"jdbc:derby:;databaseName={directory}/metastore_db;create=true",
        )
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={directory}")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "512m")
    )
    for key, value in delta_spark_conf().items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def write(directory: Path) -> dict:
    """Tier the scenario; where the entry pointed before the re-created table's round."""
    spark = hive_session(directory)
    config = LakeConfig(root=str(directory / "lake"), catalog_database=DATABASE)
    writer = make_round_writer(spark, config, JOB)
    snap = write_snapshot(directory / "s", ORDERS, [(row(1, "a"), 0), (row(2, "b"), 1)])
    commit(writer, {SnapshotSplit("orders", 0, 1, snapshot_id=1, log_offset=2): [snap]})
    log = write_log(
        directory / "l", ORDERS, [(2, "+U", row(1, "a2", "2.50")), (3, "-D", {"id": 2}), (4, "+I", row(3, "c"))]
    )
    commit(writer, {LogSplit("orders", 0, 1, 2, 5): [log]}, round_id=2)

    elsewhere = directory / "elsewhere"
    shutil.copytree(directory / "lake" / "orders", elsewhere)  # a copy: Delta re-points only to the same schema
    spark.sql(f"ALTER TABLE {writer.catalog.name('orders')} SET LOCATION '{elsewhere}'")
    before = writer.catalog.location("orders")

    fresh = make_round_writer(spark, config, JOB)
    recreated = dataclasses.replace(ORDERS, table_id=2)
    rows = [(row(i, name, price), offset) for i, (name, price, offset) in RECREATED.items()]
    snap = write_snapshot(directory / "r", recreated, rows)
    split = SnapshotSplit("orders", 0, 2, snapshot_id=1, log_offset=len(rows))
    commit(fresh, {split: [snap]}, table=recreated, epoch=2, round_id=2, replace_table=True)
    return {"before": before}


def read(directory: Path) -> dict:
    """What another session finds in the metastore: the entry's location and its rows."""
    spark = hive_session(directory)
    catalog = TableCatalog(spark, Lake.at(str(directory / "lake")), DATABASE)
    rows = [{k: _json(v) for k, v in r.asDict().items()} for r in spark.table(f"{DATABASE}.orders").collect()]
    return {"location": catalog.location("orders"), "rows": rows}


def _json(value):
    """A value as JSON holds it: decimals as strings, timestamps (Spark's naive local times) as
    UTC ISO strings."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat()
    return value


def run(mode: str, directory: Path, timeout_s: float = 300) -> dict:
    """Run ``mode`` (write, read) in a process of its own; its result."""
    proc = subprocess.run(
        [sys.executable, "-m", __name__, mode, str(directory)],
        cwd=_REPO,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    results = [line.removeprefix(RESULT) for line in proc.stdout.splitlines() if line.startswith(RESULT)]
    assert proc.returncode == 0 and results, f"{mode} exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    return json.loads(results[-1])


if __name__ == "__main__":
    step = {"write": write, "read": read}[sys.argv[1]]
    print(RESULT + json.dumps(step(Path(sys.argv[2]))), flush=True)
