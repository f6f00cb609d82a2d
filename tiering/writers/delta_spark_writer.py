"""Committing one table's round with delta-spark (the Delta JVM jars): one atomic commit, at most once.

Failure modes and what happens (the same protocol as :mod:`tiering.writers.delta_rs_writer`):
- the Delta jars are not on Spark's classpath -> :class:`ConfigError` when the writer is
  built, before any lease is taken, saying how to add them or to use ``delta-rs``;
- a lake on S3 -> :class:`ConfigError` when the writer is built (:func:`refuse_s3_lake`): two
  drivers could commit the same Delta version there and one silently overwrite the other;
- a local lake two drivers can reach (a standby that took over, a zombie after a failover): Delta
  commits a version there with ``HDFSLogStore`` (``spark.delta.logStore.file.impl``), which checks
  that the version's file is absent and then renames the commit onto it, and a rename replaces a
  file; its lock is one JVM's. A commit of the other driver landing between the two is replaced:
  its changes are lost, and a round of the other driver, planned from the commit it verified,
  trims its splits against positions the lake no longer holds. Delta ships no ``file:`` LogStore
  that creates the version without replacing it, so the configuration refuses delta-spark unless
  ``lake.delta_spark_single_driver`` declares that no two drivers of the job ever run at once
  (:class:`~tiering.conf.model.LakeConfig`, exit 2);
- the round is replayed: the txn version of ``tiering/<job>/<table>`` already reaches
  ``(epoch, round)`` -> nothing is written, ``skipped=True``. Checked first here, and again
  by Delta itself inside the write transaction (``txnAppId``/``txnVersion`` options: Delta
  skips a write whose version is not above the table's, atomically with its commit);
- a stale term writes after a newer one committed: skipped as above when seen first; when
  the newer commit lands between our check and our write, Delta skips (or rejects, as a
  ``ConcurrentTransaction``/``ConcurrentDeleteRead`` conflict) our write -> :class:`FencedEpochError`
  when a newer epoch won, :class:`LakeCommitError` otherwise;
- the KV table gained a column: the write sets Delta's ``mergeSchema`` option, so the write's
  own transaction updates the table's metadata (``WriteIntoDelta`` calls ``updateMetadata`` on
  the transaction it commits the files with; ``mergeSchema`` is allowed with ``replaceWhere``,
  unlike ``overwriteSchema``): one commit with ``metaData``, ``add``/``remove`` and the ``txn``.
  Not the session-wide ``spark.databricks.delta.schema.autoMerge.enabled``: the round's tables
  commit concurrently in one session, and only a round whose check found new columns may evolve
  a schema. Not an ``ALTER TABLE ADD COLUMNS``: that is a commit of its own, without the round's
  txn. Delta appends the column after the system columns (delta-rs keeps the KV order); columns
  match by name, so both read the same;
- a schema change the lake cannot follow -> :class:`LakeCommitError` naming the table and the
  column, before any file is written (:mod:`tiering.writers.schema_change`);
- a column whose name holds a space, a tab, a newline or one of ``,;{}()=``: delta-spark refuses
  to write it into a table without column mapping (``DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES``),
  and column mapping (physical names in the files and the stats) is not a layout the lake's
  readers follow -> :class:`SchemaMismatchError` naming the table and the column, before anything
  is read or written (delta-rs writes such a column as it is);
- ``lake.change_data_feed = true`` with ``lake.delta_spark_write = "replace"``: refused when the
  configuration is loaded (``ConfigError``): the ``replaceWhere`` overwrite below is recorded by
  Delta as every row of every touched bucket deleted and inserted again, not as the round's
  changes. With ``"merge"`` a round that changes rows already in the lake is one Delta MERGE
  (:mod:`tiering.writers.delta_spark_merge`), which records exactly the round's changes and writes
  deletion vectors instead of rewriting files; a table that has deletion vectors is merged
  whatever the setting (the bucket rewrite would read its files without them);
- a crash or a conflict after delta-spark wrote files -> orphan files in bucket directories,
  unreferenced by the log (a full ``VACUUM`` removes them; delta-spark does not say which they are).

On the ``"replace"`` path, and for rounds that create a table, replace it or only fill buckets
the lake lacks, the data path is the delta-rs writer's (:mod:`tiering.writers.bucket_rows`): every
bucket the round touches is rewritten; here delta-spark's distributed write replaces exactly those
buckets with ``replaceWhere`` on the ``__bucket`` partition column. The commit's positions
travel in ``userMetadata`` (delta-spark's only free commit info field) as the JSON of
:func:`tiering.delta_log.commits.commit_metadata`. Reading the lake stays Spark-free (delta-rs).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from tiering.delta_log.commits import maintenance_metadata
from tiering.delta_log.lake import Lake, LakeTable, has_deletion_vectors
from tiering.delta_log.layout import BUCKET_COLUMN, DELETION_VECTORS_PROPERTY, lake_schema
from tiering.enumerator.splits import Split
from tiering.errors import ConfigError, SchemaMismatchError
from tiering.kvstore.contract import StoreTable
from tiering.writers.bucket_plan import BucketPlan
from tiering.writers.bucket_rows import bucket_rows
from tiering.writers.change_feed import CHANGE_FEED_PROPERTY, needs_merge
from tiering.writers.delta_jars import check_delta_jars
from tiering.writers.delta_spark_merge import check_delta_session, commit_session, merge_round, set_properties
from tiering.writers.round_writer import PreparedRound, RoundWriter, TableCommit, WritePath, WrittenRound, output_rows

__all__ = ["DeltaSparkRoundWriter", "refuse_s3_lake"]

log = logging.getLogger(__name__)

#: Characters delta-spark refuses in a column name unless the table maps columns to physical names.
DELTA_INVALID_NAME_CHARACTERS = " ,;{}()\n\t="

#: Why delta-spark cannot commit to an S3 lake of this job, and what to do instead.
_S3_LAKE = (
    "lake.writer = 'delta-spark' cannot commit to lake.root = {root!r} on S3: Delta commits a version there "
    "through its S3 LogStore (S3SingleDriverLogStore, spark.delta.logStore.s3.impl), which checks that the "
    "version's file is absent and then writes it in two requests, not in one conditional put, so a second "
    "driver committing the same version (a zombie after a failover, or this job's own delta-rs commits: table "
    "fences, maintenance) can overwrite a commit and lose it; the txn fencing of a round cannot catch a commit "
    "that is no longer in the log. Delta ships no S3 LogStore with conditional writes, and "
    "io.delta.storage.S3DynamoDBLogStore excludes only writers that go through the same DynamoDB table, which "
    'delta-rs does not. Use lake.writer = "delta-rs" on S3 (every commit an If-None-Match: * put)'
)


def refuse_s3_lake(lake: Lake) -> None:
    """:class:`ConfigError` when ``lake`` is on S3, where delta-spark's commits are not mutually
    exclusive with another driver's (docs/DESIGN.md §6, the writers)."""
    if lake.store.is_s3:
        raise ConfigError([_S3_LAKE.format(root=lake.store.root)])


class DeltaSparkRoundWriter(RoundWriter):
    """Writes rounds with Spark and commits them with delta-spark's own transaction.

    ``write``: ``"merge"`` (a round that changes lake rows is one MERGE, with deletion vectors)
    or ``"replace"`` (its buckets are rewritten); ``change_data_feed`` needs ``"merge"``."""

    def __init__(
        self, spark: SparkSession, lake: Lake, writer_id: str, *, write: str = "merge", change_data_feed: bool = False
    ) -> None:
        refuse_s3_lake(lake)
        check_delta_jars(spark)
        if write == "merge":
            check_delta_session(spark)
        elif change_data_feed:
            raise ConfigError([f'lake.change_data_feed = true needs lake.delta_spark_write = "merge", not {write!r}'])
        super().__init__(spark, lake, writer_id)
        self._merge = write == "merge"
        self._change_data_feed = change_data_feed

    def _properties(self) -> dict[str, str]:
        """The table properties this writer's rounds need."""
        wanted = {DELETION_VECTORS_PROPERTY: "true"} if self._merge else {}
        return wanted | ({CHANGE_FEED_PROPERTY: "true"} if self._change_data_feed else {})

    def _adjust_table(self, dt: DeltaTable, epoch: int) -> None:
        """A table created without the properties :meth:`_properties` names gets them (deletion
        vectors and the feed apply from the next commit on)."""
        current = dt.metadata().configuration
        missing = {k: v for k, v in self._properties().items() if current.get(k) != v}
        if missing:
            log.info("table at %s: setting %s", dt.table_uri, sorted(missing))
            metadata = maintenance_metadata(job=self._writer_id, epoch=epoch, operation=f"set {sorted(missing)}")
            set_properties(self._spark, dt.table_uri, missing, metadata)
            dt.update_incremental()

    def prepare(
        self,
        table: StoreTable,
        splits: Sequence[Split],
        files: Mapping[Split, Sequence[str]],
        current: LakeTable | None,
        **round_args: Any,
    ) -> PreparedRound | TableCommit:
        """As every writer prepares, after checking that delta-spark can write ``table``'s columns
        and read the round's input: Spark reads a store's files, so a store read only through its
        reader (``reader``: Apache Fluss) is refused, before anything is read or written."""
        if round_args.get("reader") is not None:
            raise ConfigError(
                [
                    f"lake.writer = \"delta-spark\" reads a round's store files with Spark; table {table.name!r}'s "
                    'store has none (it is read through the store\'s reader): expected lake.writer = "delta-rs"'
                ]
            )
        _check_column_names(table)
        return super().prepare(table, splits, files, current, **round_args)

    def _write_path(self, prepared: PreparedRound) -> WritePath:
        """delta-spark writes the data inside its own commit (a Spark job per table): one MERGE
        when the round changes lake rows and merging is on or the table's files may carry
        deletion vectors, else its bucket write."""
        dt = prepared.dt
        if dt is not None and needs_merge(prepared) and (self._merge or has_deletion_vectors(dt)):
            return WritePath.DELTA_SPARK_MERGE
        return WritePath.DELTA_SPARK

    def _commit(self, prepared: PreparedRound, written: WrittenRound) -> TableCommit:
        if prepared.write_path is WritePath.DELTA_SPARK_MERGE:
            self._ensure_landed(prepared, _error_of(lambda: merge_round(self._spark, prepared)))
            return self._landed(prepared, rows_out=lambda commit: output_rows(commit, "numOutputRows"))
        defaults = {
            f"spark.databricks.delta.properties.defaults.{k.removeprefix('delta.')}": v
            for k, v in self._properties().items()
        }
        rows = self._rows(commit_session(self._spark, defaults), prepared.table, prepared.plans)
        writer = (
            rows.write.format("delta")
            .partitionBy(BUCKET_COLUMN)
            .option("txnAppId", prepared.app)
            .option("txnVersion", str(prepared.version))
            .option("userMetadata", json.dumps(dict(prepared.metadata), sort_keys=True))
        )
        if prepared.dt is None:
            writer = writer.mode("errorifexists")
        elif prepared.replace_table:
            writer = writer.mode("overwrite").option("overwriteSchema", "true")
        else:
            buckets = ", ".join(str(p.bucket) for p in prepared.plans)
            writer = writer.mode("overwrite").option("replaceWhere", f"`{BUCKET_COLUMN}` IN ({buckets})")
            if prepared.added_columns:
                writer = writer.option("mergeSchema", "true")
        self._ensure_landed(prepared, _error_of(lambda: writer.save(prepared.path)))
        return self._landed(prepared, rows_out=lambda commit: output_rows(commit, "numOutputRows"))

    def _rows(self, session: SparkSession, table: StoreTable, plans: Sequence[BucketPlan]) -> DataFrame:
        """The buckets' new rows in the lake's column order, in ``session`` (whose settings the
        write takes).

        Buckets that end up empty still get a (zero-row) write: it removes their old files.
        """
        rows = bucket_rows(session, table, plans)
        columns = lake_schema(table).names
        if rows is None:
            rows = session.createDataFrame(lake_schema(table).empty_table())
        return rows.select(*columns)


def _error_of(write: Callable[[], object]) -> Exception | None:
    """What ``write`` raised, if anything: a commit that raised may still have landed."""
    try:
        write()
    except Exception as e:
        return e
    return None


def _check_column_names(table: StoreTable) -> None:
    """:class:`SchemaMismatchError` naming every column delta-spark would refuse to write."""
    refused = [c.name for c in table.columns if any(ch in DELTA_INVALID_NAME_CHARACTERS for ch in c.name)]
    if refused:
        raise SchemaMismatchError(
            f"table {table.name!r}: delta-spark cannot write column(s) {refused}: Delta refuses any of "
            f"{DELTA_INVALID_NAME_CHARACTERS!r} in a column name unless the table maps columns to physical names "
            '(column mapping, which the lake does not use); expected names without them, or lake.writer = "delta-rs" '
            "(it writes them as they are)",
            table=table.name,
        )
