"""Committing one table's round to Delta with delta-rs: one atomic commit, at most once.

Failure modes and what happens:
- the round is replayed (crash after the commit, a new leader re-running the checkpoint's
  batch): the table's Delta txn version for ``tiering/<job>/<table>`` already reaches
  ``(epoch, round)`` -> nothing is written, ``skipped=True`` (delta-rs does not skip on its
  own, so the version is checked first);
- a stale term commits after a newer one: its version is lower -> skipped, and its lake
  report is then fenced by the store; when both race, delta-rs's conflict checker rejects
  the later commit (``ConcurrentTransaction`` for the same app id, or ``ConcurrentDeleteRead``
  since every rewrite removes files) -> :class:`FencedEpochError` when a newer epoch won,
  :class:`LakeCommitError` otherwise; nothing of the loser lands;
- the KV table's schema no longer matches the Delta table -> :class:`LakeCommitError`
  naming the columns, before any file is written;
- a crash between writing files and committing -> orphan files in bucket directories
  (unreferenced; a full ``VACUUM`` removes them) and a staging directory (removed after a day).

The data path is copy-on-write per bucket (Hudi-style): every bucket the round touches is
rewritten entirely by Spark executors (see :mod:`tiering.lake.bucket_rows`), then one commit
removes exactly those buckets' old files and adds the new ones. Partitioning by ``__bucket``
keeps that a metadata operation on the other buckets.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
from deltalake import DeltaTable, Schema
from deltalake.exceptions import TableNotFoundError
from deltalake.transaction import CommitProperties, Transaction, create_table_with_add_actions
from pyspark.sql import SparkSession

from tiering.enumerator.positions import LakePosition
from tiering.enumerator.splits import Split
from tiering.errors import FencedEpochError, LakeCommitError
from tiering.kvstore.models import TableInfo
from tiering.lake import staging
from tiering.lake.bucket_rows import bucket_rows
from tiering.lake.layout import BUCKET_COLUMN, app_id, epoch_round, lake_schema, table_path, txn_version
from tiering.lake.positions import LakeCommitInfo, commit_metadata, find_round_commit, info_from_table
from tiering.lake.round_plan import BucketPlan, plan_buckets

__all__ = ["TableCommit", "DeltaRsRoundWriter"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableCommit:
    """What a table's round did. ``positions`` are the table's exclusive offsets per bucket
    after the round (all buckets, not only this round's). ``skipped``: nothing was committed
    because the lake already had this round (or a newer one), or the round changed nothing."""

    table: str
    table_id: int
    delta_version: int
    positions: Mapping[int, int] = field(hash=False)
    skipped: bool
    bootstrap_buckets: tuple[int, ...] = ()
    log_buckets: tuple[int, ...] = ()
    rows_in: int = 0
    rows_out: int = 0

    def __str__(self) -> str:
        if self.skipped:
            return f"skipped (lake at Delta version {self.delta_version})"
        return (
            f"Delta version {self.delta_version}: bootstrap buckets {list(self.bootstrap_buckets)}, "
            f"log buckets {list(self.log_buckets)}, {self.rows_in} changes in, {self.rows_out} rows out"
        )


class DeltaRsRoundWriter:
    """Writes rounds with Spark (data) and delta-rs (the commit). No Delta JVM jars needed."""

    def __init__(self, spark: SparkSession, lake_root: str, job: str) -> None:
        table_path(lake_root, "probe")  # refuse an unsupported root now, not mid-round
        app_id(job, "probe")
        self._spark = spark
        self._lake_root = lake_root
        self._job = job
        # Delta's timestamp is Parquet INT64 micros; Spark's default (INT96) is not readable.
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

        ``files`` maps every split to its Parquet files. ``replace_table``: the table was
        re-created upstream (new ``table_id``); every existing file and the schema are replaced.
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
        staging.clean_stale(path)
        stage = staging.new_staging_dir(path)
        try:
            rows_in = self._write_rows(table, plans, stage)
            adds = staging.move_into_table(stage, path)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
        positions = dict(lake.buckets) if lake is not None else {}
        positions.update({p.bucket: p.position for p in plans})
        position = LakePosition(table.table_id, positions)
        properties = CommitProperties(
            custom_metadata=commit_metadata(
                job=self._job,
                position=position,
                epoch=epoch,
                round_id=round_id,
                lease_id=lease_id,
                snapshots={p.bucket: p.snapshot_id for p in plans if p.snapshot_id is not None},
            ),
            app_transactions=[Transaction(app, version)],
        )
        schema = Schema.from_arrow(lake_schema(table))
        try:
            if dt is None:
                create_table_with_add_actions(
                    path, schema, adds, mode="error", partition_by=[BUCKET_COLUMN], commit_properties=properties
                )
            else:
                filters = None if replace_table else [(BUCKET_COLUMN, "in", [str(p.bucket) for p in plans])]
                dt.create_write_transaction(
                    adds, "overwrite", schema, partition_by=[BUCKET_COLUMN], partition_filters=filters,
                    commit_properties=properties,
                )
        except Exception as e:
            _fail_commit(e, path, adds, table, app, version, epoch)
        committed = _load(path)
        return TableCommit(
            table=table.name,
            table_id=table.table_id,
            delta_version=_delta_version(committed, self._job, version),
            positions=positions,
            skipped=False,
            bootstrap_buckets=tuple(p.bucket for p in plans if p.base == "snapshot"),
            log_buckets=tuple(p.bucket for p in plans if p.has_changes),
            rows_in=rows_in,
            rows_out=sum(_num_records(a.stats) for a in adds),
        )

    def _write_rows(self, table: TableInfo, plans: Sequence[BucketPlan], stage: str) -> int:
        """Spark writes the buckets' rows into ``stage``; returns the number of changes read."""
        rows, changes = bucket_rows(self._spark, table, plans)
        rows_in = changes.count() if changes is not None else 0
        if rows is not None:
            try:
                rows.write.mode("error").partitionBy(BUCKET_COLUMN).parquet(stage)
            except Exception as e:
                raise LakeCommitError(f"table {table.name!r}: writing the round's files failed: {e}", table=table.name) from e
        return rows_in


def _load(path: str) -> DeltaTable | None:
    try:
        return DeltaTable(path)
    except TableNotFoundError:
        return None


def _skipped(table: TableInfo, dt: DeltaTable | None, info: LakeCommitInfo | None) -> TableCommit:
    return TableCommit(
        table=table.name,
        table_id=info.position.table_id if info is not None else table.table_id,
        delta_version=dt.version() if dt is not None else -1,
        positions=dict(info.position.buckets) if info is not None else {},
        skipped=True,
    )


def _check_compatible(dt: DeltaTable, table: TableInfo, info: LakeCommitInfo | None) -> None:
    """The Delta table must hold this incarnation and have exactly the lake schema."""
    if info is not None and info.position.table_id != table.table_id:
        raise LakeCommitError(
            f"table {table.name!r}: the lake holds table_id {info.position.table_id}, the round is for "
            f"{table.table_id}; a re-created table needs replace_table=True",
            table=table.name,
        )
    have = {f.name: f.type for f in dt.schema().fields}
    want = {f.name: f.type for f in Schema.from_arrow(lake_schema(table)).fields}
    problems = [f"{n} missing in Delta" for n in want if n not in have]
    problems += [f"{n} not in the KV table" for n in have if n not in want]
    problems += [f"{n} is {have[n]} in Delta but {want[n]} in the KV table" for n in want if n in have and have[n] != want[n]]
    partitioning = list(dt.metadata().partition_columns)
    if partitioning != [BUCKET_COLUMN]:
        problems.append(f"partitioned by {partitioning}, expected [{BUCKET_COLUMN!r}]")
    if problems:
        raise LakeCommitError(
            f"table {table.name!r}: Delta schema at {dt.table_uri} is incompatible with the KV table: "
            + "; ".join(problems),
            table=table.name,
        )


def _files_by_bucket(dt: DeltaTable, path: str) -> dict[int, list[str]]:
    actions = pa.table(dt.get_add_actions(flatten=True))
    out: dict[int, list[str]] = {}
    for rel, bucket in zip(actions.column("path").to_pylist(), actions.column(f"partition.{BUCKET_COLUMN}").to_pylist()):
        out.setdefault(int(bucket), []).append(rel if rel.startswith("/") or "://" in rel else f"{path}/{rel}")
    return out


def _fail_commit(
    error: Exception, path: str, adds: list, table: TableInfo, app: str, version: int, epoch: int
) -> None:
    """A commit raised: decide whether it landed anyway, who won, and clean up if it did not."""
    after = _load(path)
    done = after.transaction_version(app) if after is not None else None
    if done == version:
        return  # it landed (the error came after the log entry was written)
    staging.remove_files(path, adds)
    if done is not None and epoch_round(done)[0] > epoch:
        raise FencedEpochError(
            f"table {table.name!r}: a newer term committed {epoch_round(done)} while epoch {epoch} was committing",
            code="FENCED_EPOCH",
            table=table.name,
            epoch=epoch,
        ) from error
    raise LakeCommitError(f"table {table.name!r}: Delta commit failed: {error}", table=table.name, epoch=epoch) from error


def _delta_version(dt: DeltaTable, job: str, txn: int) -> int:
    commit = find_round_commit(dt, job, txn)
    return int(commit["version"]) if commit is not None else dt.version()


def _num_records(stats: str) -> int:
    return int(json.loads(stats)["numRecords"])
