"""Committing one table's round with delta-spark (the Delta JVM jars): one atomic commit, at most once.

Failure modes and what happens (the same protocol as :mod:`tiering.lake.round_writer`):
- the Delta jars are not on Spark's classpath -> :class:`ConfigError` when the writer is
  built, before any lease is taken, saying how to add them or to use ``delta-rs``;
- the round is replayed: the txn version of ``tiering/<job>/<table>`` already reaches
  ``(epoch, round)`` -> nothing is written, ``skipped=True``. Checked first here, and again
  by Delta itself inside the write transaction (``txnAppId``/``txnVersion`` options: Delta
  skips a write whose version is not above the table's, atomically with its commit);
- a stale term writes after a newer one committed: skipped as above when seen first; when
  the newer commit lands between our check and our write, Delta skips (or rejects, as a
  ``ConcurrentTransaction``/``ConcurrentDeleteRead`` conflict) our write -> :class:`FencedEpochError`
  when a newer epoch won, :class:`LakeCommitError` otherwise;
- the KV table's schema no longer matches the Delta table -> :class:`LakeCommitError`
  naming the columns, before any file is written;
- a crash or a conflict after delta-spark wrote files -> orphan files in bucket directories,
  unreferenced by the log (a full ``VACUUM`` removes them; delta-spark does not say which they are).

The data path is the delta-rs writer's (:mod:`tiering.lake.bucket_rows`): every bucket the
round touches is rewritten; here delta-spark's distributed write replaces exactly those
buckets with ``replaceWhere`` on the ``__bucket`` partition column. The commit's positions
travel in ``userMetadata`` (delta-spark's only free commit info field) as the JSON of
:func:`tiering.lake.positions.commit_metadata`. Reading the lake stays Spark-free (delta-rs).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from tiering.enumerator.positions import LakePosition
from tiering.enumerator.splits import Split
from tiering.errors import ConfigError, FencedEpochError, LakeCommitError
from tiering.kvstore.models import TableInfo
from tiering.lake.bucket_rows import bucket_rows
from tiering.lake.layout import BUCKET_COLUMN, app_id, epoch_round, lake_schema, table_path, txn_version
from tiering.lake.positions import commit_metadata, find_round_commit, info_from_table
from tiering.lake.round_plan import BucketPlan, plan_buckets
from tiering.lake.round_writer import TableCommit, _check_compatible, _files_by_bucket, _load, _skipped

__all__ = ["DELTA_CLASS", "DeltaSparkRoundWriter", "check_delta_jars"]

log = logging.getLogger(__name__)

#: A class every delta-spark release ships; loadable iff the jars are on the driver's classpath.
DELTA_CLASS = "io.delta.tables.DeltaTable"

_MISSING_JARS = (
    "lake.writer: 'delta-spark' needs the Delta Lake jars on Spark's classpath, but {cls} is not "
    "loadable ({why}); add them, e.g. spark.jars.packages = \"io.delta:delta-spark_2.13:<version "
    "matching Spark {spark}>\" in the [spark] section (or --packages / spark.jars with "
    "spark-submit), or use lake.writer = \"delta-rs\" (no JVM jars needed)"
)


def check_delta_jars(spark: SparkSession) -> None:
    """:class:`ConfigError` unless the Delta classes load in the driver's JVM."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        why = "this session has no local JVM (Spark Connect?)"
    else:
        from py4j.java_gateway import JavaClass

        # py4j resolves names with the context class loader, which holds spark.jars/--packages
        if isinstance(jvm.io.delta.tables.DeltaTable, JavaClass):
            return
        why = "class not found"
    raise ConfigError([_MISSING_JARS.format(cls=DELTA_CLASS, why=why, spark=spark.version)])


class DeltaSparkRoundWriter:
    """Writes rounds with Spark and commits them with delta-spark's own transaction."""

    def __init__(self, spark: SparkSession, lake_root: str, job: str) -> None:
        table_path(lake_root, "probe")  # refuse an unsupported root now, not mid-round
        app_id(job, "probe")
        check_delta_jars(spark)
        self._spark = spark
        self._lake_root = lake_root
        self._job = job
        # INT64 micros: the timestamp encoding every Delta reader (delta-rs too) understands.
        spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")

    def write_table_round(
        self,
        table: TableInfo,
        splits: Sequence[Split],
        files: Mapping[Split, Sequence[str]],
        *,
        epoch: int,
        round_id: int,
        lease_id: str,
        replace_table: bool = False,
    ) -> TableCommit:
        """Commit ``splits`` of ``table`` as round ``round_id`` of term ``epoch``, at most once.

        The contract of :meth:`tiering.lake.round_writer.DeltaRsRoundWriter.write_table_round`.
        """
        path = table_path(self._lake_root, table.name)
        app, version = app_id(self._job, table.name), txn_version(epoch, round_id)
        dt = _load(path)
        info = info_from_table(dt, table.name) if dt is not None else None
        done = dt.transaction_version(app) if dt is not None else None
        if done is not None and done >= version:
            log.info("table=%s round %s already in the lake (at %s): skipped", table.name, (epoch, round_id), epoch_round(done))
            return _skipped(table, dt, info)
        if dt is not None and not replace_table:
            _check_compatible(dt, table, info)
        lake = info.position if info is not None and not replace_table else None
        lake_files = _files_by_bucket(dt, path) if dt is not None and not replace_table else {}
        plans = [p for p in plan_buckets(table, splits, files, lake, lake_files) if p.rewrites]
        if not plans:
            return _skipped(table, dt, info)
        positions = dict(lake.buckets) if lake is not None else {}
        positions.update({p.bucket: p.position for p in plans})
        metadata = commit_metadata(
            job=self._job,
            position=LakePosition(table.table_id, positions),
            epoch=epoch,
            round_id=round_id,
            lease_id=lease_id,
            snapshots={p.bucket: p.snapshot_id for p in plans if p.snapshot_id is not None},
        )
        rows, rows_in = self._rows(table, plans)
        writer = (
            rows.write.format("delta")
            .partitionBy(BUCKET_COLUMN)
            .option("txnAppId", app)
            .option("txnVersion", str(version))
            .option("userMetadata", json.dumps(metadata, sort_keys=True))
        )
        if dt is None:
            writer = writer.mode("errorifexists")
        elif replace_table:
            writer = writer.mode("overwrite").option("overwriteSchema", "true")
        else:
            buckets = ", ".join(str(p.bucket) for p in plans)
            writer = writer.mode("overwrite").option("replaceWhere", f"`{BUCKET_COLUMN}` IN ({buckets})")
        error: Exception | None = None
        try:
            self._save(writer, path)
        except Exception as e:
            error = e
        _check_landed(error, path, table, app, version, epoch)
        committed = _load(path)
        ours = find_round_commit(committed, self._job, version)
        return TableCommit(
            table=table.name,
            table_id=table.table_id,
            delta_version=int(ours["version"]) if ours is not None else committed.version(),
            positions=positions,
            skipped=False,
            bootstrap_buckets=tuple(p.bucket for p in plans if p.base == "snapshot"),
            log_buckets=tuple(p.bucket for p in plans if p.has_changes),
            rows_in=rows_in,
            rows_out=_output_rows(ours),
        )

    def _rows(self, table: TableInfo, plans: Sequence[BucketPlan]) -> tuple[DataFrame, int]:
        """The buckets' new rows in the lake's column order, and the number of changes read.

        Buckets that end up empty still get a (zero-row) write: it removes their old files.
        """
        rows, changes = bucket_rows(self._spark, table, plans)
        columns = lake_schema(table).names
        if rows is None:
            rows = self._spark.createDataFrame(lake_schema(table).empty_table())
        return rows.select(*columns), (changes.count() if changes is not None else 0)

    def _save(self, writer: Any, path: str) -> None:
        """The delta-spark write and commit (a seam: tests run a racing commit before it)."""
        writer.save(path)


def _check_landed(error: Exception | None, path: str, table: TableInfo, app: str, version: int, epoch: int) -> None:
    """Did our commit land? delta-spark skips a write silently when the app id's version is
    already at or above ours, and may have raised after writing its log entry."""
    after = _load(path)
    done = after.transaction_version(app) if after is not None else None
    if done == version:
        return
    if done is not None and epoch_round(done)[0] > epoch:
        raise FencedEpochError(
            f"table {table.name!r}: a newer term committed {epoch_round(done)} while epoch {epoch} was committing",
            code="FENCED_EPOCH",
            table=table.name,
            epoch=epoch,
        ) from error
    reason = f"Delta commit failed: {error}" if error is not None else (
        f"Delta skipped the write: the lake's txn version for {app!r} is {done} "
        f"({epoch_round(done) if done is not None else None}), the round's is {version}"
    )
    raise LakeCommitError(f"table {table.name!r}: {reason}", table=table.name, epoch=epoch) from error


def _output_rows(commit: Mapping[str, Any] | None) -> int:
    metrics = commit.get("operationMetrics", {}) if commit is not None else {}
    return int(metrics.get("numOutputRows", 0))
