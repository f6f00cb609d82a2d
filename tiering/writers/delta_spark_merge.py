"""A delta-spark round as one Delta MERGE (``lake.delta_spark_write = "merge"``): row-level
changes, with deletion vectors, so that a small change to a big table rewrites no file and the
change data feed holds exactly the round's changes (docs/DESIGN.md §6).

Why a MERGE: the ``replaceWhere`` write rewrites every bucket the round touches, and Delta
records that as every row of those buckets deleted and inserted again. Delta's MERGE writes only
the changed rows: with ``delta.enableDeletionVectors`` on, the files holding a changed key get a
deletion vector (a bitmap of their dropped rows) instead of being rewritten, and with
``delta.enableChangeDataFeed`` on it writes ``_change_data`` files: ``insert``,
``update_preimage``/``update_postimage`` and ``delete``. The source is the newest change per key
of each changelog bucket, and the whole new content of each bucket bootstrapped from a snapshot
(:func:`tiering.writers.bucket_rows.merge_rows`); the statement is the delta-rs change feed's
(:mod:`tiering.writers.change_feed`): rows whose ``__offset`` equals the lake's are left alone, a
re-bootstrapped bucket's lake rows the snapshot lacks are deleted.

Failure modes and what happens:
- a replayed or stale round: Delta's MERGE takes the round's txn from the session's
  ``spark.databricks.delta.write.txnAppId``/``txnVersion`` (it has no write options) and skips
  the commit, atomically, when the table's version for the app id already reaches it; the
  writer then tells landed, skipped and fenced apart as on the ``replaceWhere`` path. Those
  settings, the commit's ``userMetadata`` and schema evolution are session-wide, and the round's
  tables commit concurrently: each commit runs in a session of its own (:func:`commit_session`,
  sharing the SparkContext), so no commit sees another's txn;
- the KV table gained a column: the MERGE evolves the schema in its own commit
  (``schema.autoMerge`` in that session only);
- a session without Delta's SQL extension and catalog: Delta refuses deletion vectors and
  MERGE there -> :class:`ConfigError` when the writer is built (:func:`check_delta_session`),
  naming the two ``spark.*`` keys, before any lease is taken.

Deletion vectors and the lake's own reads (delta-rs 1.x): a table with them needs the reader
feature ``deletionVectors``. delta-rs reads such a table's log (versions, the txn, commit infos,
add actions: the round's positions, status, replay) and scans it through DataFusion with the
vectors applied, and its OPTIMIZE keeps them; its pyarrow dataset refuses the table
(``DeltaProtocolError``), so :meth:`tiering.delta_log.lake.LakeTable.to_arrow` scans such a table
with DataFusion. What cannot follow is a rewrite that reads a lake file's Parquet as it is (the
delta-rs writer's bucket rewrite, the ``replaceWhere`` path's): it would bring back the rows a
vector deleted, so a table with deletion vectors is always merged by delta-spark and refused by
the delta-rs writer, naming the setting.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from tiering.delta_log.layout import BUCKET_COLUMN, lake_schema
from tiering.errors import ConfigError
from tiering.kvstore.contract import DELETE, OFFSET_COLUMN, OP_COLUMN
from tiering.writers.bucket_plan import BucketBase
from tiering.writers.bucket_rows import merge_rows, output_columns
from tiering.writers.round_writer import PreparedRound

__all__ = [
    "check_delta_session",
    "commit_session",
    "merge_round",
    "set_properties",
]

#: What Delta needs in the session for MERGE and deletion vectors (Delta's docs set both).
_DELTA_SESSION = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def check_delta_session(spark: SparkSession) -> None:
    """:class:`ConfigError` naming each of Delta's session settings ``spark`` lacks."""
    problems = [
        f'lake.delta_spark_write = "merge" needs {key} = "{value}" in the [spark] section (or with spark-submit '
        f'--conf): Delta refuses MERGE and deletion vectors without it; or lake.delta_spark_write = "replace"'
        for key, value in _DELTA_SESSION.items()
        if value not in (spark.conf.get(key, "") or "")
    ]
    if problems:
        raise ConfigError(problems)


def commit_session(spark: SparkSession, settings: Mapping[str, str]) -> SparkSession:
    """A session of its own for one commit (same SparkContext), with ``settings`` in its SQL conf,
    and the lake's Parquet timestamps (Delta's are INT64 micros)."""
    session = spark.newSession()
    for key, value in {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS", **settings}.items():
        session.conf.set(key, value)
    return session


def round_settings(prepared: PreparedRound) -> dict[str, str]:
    """The session settings that make Delta's commit the round's: its txn and commit metadata."""
    return {
        "spark.databricks.delta.write.txnAppId": prepared.app,
        "spark.databricks.delta.write.txnVersion": str(prepared.version),
        "spark.databricks.delta.commitInfo.userMetadata": json.dumps(dict(prepared.metadata), sort_keys=True),
        "spark.databricks.delta.schema.autoMerge.enabled": "true" if prepared.added_columns else "false",
    }


def set_properties(spark: SparkSession, path: str, properties: Mapping[str, str], metadata: Mapping[str, Any]) -> None:
    """Set table ``properties`` in one commit of Delta's (``ALTER TABLE``, which upgrades the
    protocol to the features they need) carrying ``metadata`` as its ``userMetadata``."""
    session = commit_session(spark, {"spark.databricks.delta.commitInfo.userMetadata": json.dumps(dict(metadata))})
    assignments = ", ".join(f"'{k}' = '{v}'" for k, v in properties.items())
    session.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({assignments})")


def merge_round(spark: SparkSession, prepared: PreparedRound) -> None:
    """The round's buckets as one MERGE into the table at ``prepared.path``, committed with the
    round's txn and metadata (a replay is skipped by Delta)."""
    session = commit_session(spark, round_settings(prepared))
    table = prepared.table
    source = merge_rows(session, table, prepared.plans)
    if source is None:  # re-bootstrapped buckets that are empty now: their lake rows go
        source = _empty_source(session, prepared)
    buckets = ", ".join(str(p.bucket) for p in prepared.plans)
    on = f"t.{_name(BUCKET_COLUMN)} IN ({buckets}) AND " + " AND ".join(
        f"t.{k} = s.{k}" for k in map(_name, [BUCKET_COLUMN, *table.primary_key])
    )
    delete, offset = f"s.{_name(OP_COLUMN)} = '{DELETE}'", _name(OFFSET_COLUMN)
    jvm: Any = spark._jvm
    values = jvm.java.util.HashMap()
    for column in map(_name, output_columns(table)):
        values.put(column, f"s.{column}")
    target = jvm.io.delta.tables.DeltaTable.forPath(session._jsparkSession, prepared.path)
    merge = (
        target.alias("t")
        .merge(source.alias("s")._jdf, on)
        .whenMatched(delete)
        .delete()
        .whenMatched(f"NOT ({delete}) AND t.{offset} <> s.{offset}")
        .updateExpr(values)
        .whenNotMatched(f"NOT ({delete})")
        .insertExpr(values)
    )
    rebootstrapped = [
        p.bucket for p in prepared.plans if p.base is BucketBase.SNAPSHOT and p.bucket in prepared.lake_buckets
    ]
    if rebootstrapped:
        listed = ", ".join(map(str, rebootstrapped))
        merge = merge.whenNotMatchedBySource(f"t.{_name(BUCKET_COLUMN)} IN ({listed})").delete()
    merge.execute()


def _empty_source(session: SparkSession, prepared: PreparedRound) -> DataFrame:
    schema = lake_schema(prepared.table).append(pa.field(OP_COLUMN, pa.string()))
    return session.createDataFrame(schema.empty_table())


def _name(column: str) -> str:
    """A column as a quoted Spark SQL identifier (keys may be mixed case or hold spaces)."""
    return "`" + column.replace("`", "``") + "`"
