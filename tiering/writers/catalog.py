"""Registering the tiered tables in the Spark session catalog (``lake.catalog_database``), so that
``spark.table("db.orders")`` in any session on that catalog reads the lake.

Failure modes and what happens:
- the session cannot hold Delta tables (no Delta jars, or another ``spark.sql.catalog.spark_catalog``
  than Delta's) -> :class:`ConfigError` when the writer is built, before any lease is taken,
  naming the setting and what is missing;
- registering a table fails (a name the catalog refuses: the session catalog takes letters, digits
  and ``_`` only; the metastore unreachable; an entry of that name pointing somewhere else) -> a
  warning naming the table, the database and the cause. Nothing else fails: the round is
  committed and reported, and the table is tried again after its next commit;
- the upstream table was re-created (its round replaced the Delta table): its entry is checked
  again and re-pointed at the table's location when it points elsewhere (``ALTER TABLE ... SET
  LOCATION``), never dropped: an entry this job did not make may be a table of someone else's;
- a replayed or crashed term: registration is ``CREATE TABLE IF NOT EXISTS``, idempotent, and a
  new term registers again (a term remembers only what it registered itself).

Names are quoted (backticks doubled) and the location is a SQL string literal, so a table named
``order`` or ``select`` registers as any other.
"""

from __future__ import annotations

import logging
import threading

from pyspark.sql import SparkSession

from tiering.delta_log.lake import Lake
from tiering.errors import ConfigError
from tiering.writers.delta_jars import check_delta_jars

__all__ = ["DELTA_CATALOG", "TableCatalog"]

log = logging.getLogger(__name__)

#: The session catalog Delta's tables need (Delta's docs set it with its SQL extension).
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
_CATALOG_KEY = "spark.sql.catalog.spark_catalog"


def quote(name: str) -> str:
    """``name`` as one SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


class TableCatalog:
    """The tables of one term's writer registered in ``database`` of the session catalog."""

    def __init__(self, spark: SparkSession, lake: Lake, database: str) -> None:
        check_delta_jars(spark, f"lake.catalog_database = {database!r}", "leave lake.catalog_database unset")
        catalog = spark.conf.get(_CATALOG_KEY, None)
        if catalog != DELTA_CATALOG:
            raise ConfigError(
                [
                    f"lake.catalog_database = {database!r}: registering tables needs Delta's catalog, but "
                    f'{_CATALOG_KEY} is {catalog!r}; set {_CATALOG_KEY} = "{DELTA_CATALOG}" and spark.sql.extensions = '
                    '"io.delta.sql.DeltaSparkSessionExtension" in the [spark] section (or with spark-submit --conf)'
                ]
            )
        self._spark = spark
        self._lake = lake
        self.database = database
        self._registered: set[str] = set()
        self._lock = threading.Lock()
        self._database_made = False

    def name(self, table: str) -> str:
        """The table's quoted name in the catalog."""
        return f"{quote(self.database)}.{quote(table)}"

    def register(self, table: str, *, recreated: bool = False) -> bool:
        """Register ``table`` once per term (again when ``recreated``); whether it is registered.
        A failure is a warning naming it, never an exception."""
        with self._lock:
            if table in self._registered and not recreated:
                return True
        try:
            self._register(table, recreated)
        except Exception as e:  # a catalog's refusal must fail nothing else
            log.warning(
                "table=%s: not registered as %s in the session catalog: %s",
                table,
                self.name(table),
                " ".join(str(e).split())[:500],
            )
            return False
        with self._lock:
            self._registered.add(table)
        return True

    def _register(self, table: str, recreated: bool) -> None:
        location = self._lake.path(table)
        if not self._database_made:
            self._spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote(self.database)}")
            self._database_made = True
        self._spark.sql(f"CREATE TABLE IF NOT EXISTS {self.name(table)} USING DELTA LOCATION {_literal(location)}")
        found = self.location(table)
        if _same(found, location):
            return
        if not recreated:
            raise ValueError(f"the entry points at {found}, not at the lake's {location}; left as it is")
        self._spark.sql(f"ALTER TABLE {self.name(table)} SET LOCATION {_literal(location)}")
        log.info("table=%s: re-pointed %s from %s to %s", table, self.name(table), found, location)

    def location(self, table: str) -> str | None:
        """Where the catalog's entry for ``table`` points (None: it has none)."""
        rows = self._spark.sql(f"DESCRIBE TABLE EXTENDED {self.name(table)}").collect()
        return next((r["data_type"] for r in rows if r["col_name"] == "Location"), None)


def _same(found: str | None, location: str) -> bool:
    """Whether the catalog's location is ``location`` (the catalog writes local paths as ``file:``)."""
    if found is None:
        return False
    strip = lambda uri: uri.removeprefix("file://").removeprefix("file:").rstrip("/")  # noqa: E731
    return strip(found) == strip(location)
