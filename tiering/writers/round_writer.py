"""The round writer, an abstract base class both lake writers extend (docs/DESIGN.md §6): one
commit per table per round, at most once, fenced by epoch. It holds the round commit protocol's
shared steps; each writer supplies only how the data is written and committed.

A table's round goes through steps (prepare, tasks, written files, commit; the contract is
:class:`RoundWriter`'s docstring), so a round of many tables can run each step for all of them
at once (:mod:`tiering.round.committer` does). The :class:`WritePath` is decided once, in
prepare: every later step reads it.

Failure modes handled here, for every writer:
- a replayed round (crash after the commit, a new leader re-running the checkpoint's batch):
  the table's Delta txn version for ``tiering/<job>/<table>`` already reaches
  ``(epoch, round)`` -> nothing is written, ``skipped=True`` (delta-rs does not skip on its
  own, so the version is checked first);
- the KV table gained nullable columns the Delta table lacks -> the round's commit adds them to
  the Delta schema (:attr:`PreparedRound.added_columns`; each writer says how its commit carries
  the new schema): one commit, as fenced and idempotent as any other, and rows already in the
  lake read them as null;
- a schema change the lake cannot follow (a type changed, a column dropped, a NOT NULL column
  added; :mod:`tiering.writers.schema_change`) or another partitioning -> :class:`SchemaMismatchError`
  naming the table and the column, another incarnation of the table -> :class:`LakeCommitError`,
  before any file is written; the round's other tables still commit;
- another writer changed the table's rows since the job's last round commit (an append or a
  delete with another tool; :mod:`tiering.delta_log.foreign`) -> :class:`ForeignCommitError`
  naming that commit and ``tiering resync``, before anything is written (a commit that changes
  no row, an OPTIMIZE or a vacuum, is fine);
- a bucket file that could not be written -> :class:`BucketWriteError`, nothing committed;
- a commit that raised may still have landed; when it did not, a newer epoch's commit means
  :class:`FencedEpochError` (this driver must stop), anything else :class:`LakeCommitError`.
"""

from __future__ import annotations

import logging
import shlex
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from deltalake import DeltaTable, Schema
from deltalake.exceptions import DeltaError
from deltalake.transaction import PostCommitHookProperties
from pyspark.sql import SparkSession

from tiering.conf.defaults import DEFAULT_TARGET_FILE_MB
from tiering.coord.write_authority import CommitEpoch
from tiering.delta_log.commits import LakeCommitInfo, commit_metadata, fence_epoch, find_round_commit, round_commit_at
from tiering.delta_log.foreign import ForeignCommit
from tiering.delta_log.lake import Lake, LakeTable, open_table
from tiering.delta_log.layout import (
    BUCKET_COLUMN,
    CHECKPOINT_INTERVAL_PROPERTY,
    DELTA_RS_CHECKPOINT_INTERVAL,
    app_id,
    epoch_round,
    lake_schema,
    txn_version,
)
from tiering.enumerator.positions import LakePosition
from tiering.enumerator.splits import Split
from tiering.errors import (
    BucketWriteError,
    FencedEpochError,
    ForeignCommitError,
    LakeCommitError,
    SchemaMismatchError,
    one_line,
)
from tiering.kvstore.contract import BucketReader, StoreTable
from tiering.writers.bucket_plan import BucketBase, BucketPlan, plan_buckets
from tiering.writers.buckets import BucketResult, BucketTask, WrittenFile
from tiering.writers.catalog import TableCatalog
from tiering.writers.executor_writes import run_bucket_tasks
from tiering.writers.schema_change import added_columns

__all__ = ["PreparedRound", "RoundWriter", "TableCommit", "WritePath", "WrittenRound", "output_rows", "post_commit"]

log = logging.getLogger(__name__)


class WritePath(StrEnum):
    """Who writes a table's round, decided once when it is prepared (see each writer)."""

    #: Spark tasks rewrite the round's buckets (bootstraps, big rounds): no row passes through the driver
    EXECUTORS = "executors"
    #: the driver rewrites the buckets itself: a changelog round of a few changes needs no Spark job
    DRIVER = "driver"
    #: one delta-rs MERGE by the driver, so that the change data feed records the round's changes
    DRIVER_MERGE = "driver (MERGE)"
    #: delta-spark writes the data inside its own commit
    DELTA_SPARK = "delta-spark"
    #: one Delta MERGE by delta-spark, with deletion vectors (``lake.delta_spark_write``)
    DELTA_SPARK_MERGE = "delta-spark (MERGE)"


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
    #: who wrote the data files
    written_by: WritePath = WritePath.EXECUTORS
    #: columns the commit added to the Delta schema (the KV table gained them)
    added_columns: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.skipped:
            return f"skipped (lake at Delta version {self.delta_version})"
        added = f", columns added {list(self.added_columns)}" if self.added_columns else ""
        return (
            f"Delta version {self.delta_version}: bootstrap buckets {list(self.bootstrap_buckets)}, "
            f"log buckets {list(self.log_buckets)}, {self.rows_in} changes in, {self.rows_out} rows out "
            f"(written by the {self.written_by}){added}"
        )


@dataclass(frozen=True)
class PreparedRound:
    """A round checked against the lake and planned per bucket, ready to be committed."""

    table: StoreTable
    path: str
    app: str
    version: int
    epoch: CommitEpoch
    dt: DeltaTable | None
    replace_table: bool
    plans: tuple[BucketPlan, ...]
    positions: Mapping[int, int] = field(hash=False)
    metadata: Mapping[str, Any] = field(hash=False)
    #: KV columns the Delta table lacks: the round's commit adds them to the Delta schema
    added_columns: tuple[str, ...] = ()
    #: the round's buckets holding data files in the lake before it (the others' files are not read)
    lake_buckets: frozenset[int] = frozenset()
    #: who writes this round (the writer decides it in :meth:`RoundWriter.prepare`)
    write_path: WritePath = WritePath.EXECUTORS

    def result(self, delta_version: int, rows_out: int) -> TableCommit:
        return TableCommit(
            table=self.table.name,
            table_id=self.table.table_id,
            delta_version=delta_version,
            positions=dict(self.positions),
            skipped=False,
            bootstrap_buckets=tuple(p.bucket for p in self.plans if p.base is BucketBase.SNAPSHOT),
            log_buckets=tuple(p.bucket for p in self.plans if p.has_changes),
            rows_in=sum(p.num_changes for p in self.plans),
            rows_out=rows_out,
            written_by=self.write_path,
            added_columns=self.added_columns,
        )


@dataclass(frozen=True)
class WrittenRound:
    """A table's round as :meth:`RoundWriter.written_files` found it written, for
    :meth:`RoundWriter.commit`: the new files, and per bucket rewritten by file the lake files
    they replace (paths as the log names them). Which files a rewrite by file replaces is known
    only once its changes are read, on whichever process wrote it: it travels with the files."""

    files: tuple[WrittenFile, ...] = ()
    replaced: Mapping[int, tuple[str, ...]] = field(default_factory=dict, hash=False)


class RoundWriter(ABC):
    """How a table's round reaches the lake: one Delta commit per table per round, at most once,
    fenced by epoch. An abstract base, not a Protocol: the steps around a writer's own are shared
    code, not a shape to match. A writer implements who writes the data (:meth:`_write_path`) and the commit
    itself (:meth:`_commit`); the steps around them are shared, and are the contract:

    1. :meth:`prepare` checks the round against the lake and plans it: a skipped
       :class:`TableCommit` when the lake already has the round (its txn version for
       ``tiering/<job>/<table>`` reaches ``(epoch, round)``) or the round changes nothing, else a
       :class:`PreparedRound` that every later step reads. Writes nothing but a table property a
       writer needs (:meth:`_adjust_table`). Raises :class:`FencedEpochError` (a maintenance pass
       of a newer epoch fenced the table), :class:`ForeignCommitError` (another writer changed
       the table's rows), :class:`SchemaMismatchError` (a schema or partitioning the lake cannot
       follow) and :class:`LakeCommitError` (another incarnation, a gap in the changes).
    2. :meth:`tasks` names the bucket files Spark executors write (none on another path); pure.
       :meth:`write_files` runs every table's tasks in one Spark job: a bucket's failure comes
       back as its result, never raised.
    3. :meth:`written_files` adds the buckets the driver writes itself and checks every bucket's
       result: a :class:`WrittenRound` (a value; the prepared round is never changed), or
       :class:`BucketWriteError` after the table's written files are deleted.
    4. :meth:`commit` makes the table's one commit with them, carrying the txn, so a commit of the
       same round again changes nothing; a commit that raised but landed counts as landed.
       Raises :class:`FencedEpochError` when a newer term committed (this driver must stop),
       :class:`LakeCommitError` otherwise (files written before the commit are deleted, unless
       whether it landed cannot be read: the next round settles it). A catalog that fails is a
       warning, never the round's failure.

    Each step may be retried from :meth:`prepare` by a new round: nothing a step leaves behind
    (unreferenced files) changes what a reader sees. :meth:`write_table_round` chains them for one
    table; :mod:`tiering.round.committer` runs each step for all of a round's tables at once.
    """

    #: the size of the files bucket tasks write (a writer with a setting for it overrides it)
    _target_file_bytes = DEFAULT_TARGET_FILE_MB * 1024 * 1024
    #: where a committed table is registered (``lake.catalog_database``; set by
    #: :func:`tiering.writers.choice.make_round_writer`), None: nowhere
    catalog: TableCatalog | None = None

    def __init__(self, spark: SparkSession, lake: Lake, writer_id: str) -> None:
        app_id(writer_id, "probe")
        self._spark = spark
        self._lake = lake
        self._writer_id = writer_id
        # Delta's timestamp is Parquet INT64 micros; Spark's default (INT96) is not readable.
        spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")

    @property
    def lake(self) -> Lake:
        """The lake this writer commits to."""
        return self._lake

    @property
    def writer_id(self) -> str:
        """Who this writer's commits are from, as their app ids, metadata and fence name it: the
        job's name, or in a tiering group ``group:<group>`` (:attr:`tiering.context.TermContext.writer_id`)."""
        return self._writer_id

    def write_table_round(
        self,
        table: StoreTable,
        splits: Sequence[Split],
        files: Mapping[Split, Sequence[str]],
        current: LakeTable | None,
        *,
        before_commit: Callable[[], None] = lambda: None,
        **round_args: Any,
    ) -> TableCommit:
        """Commit ``splits`` of ``table`` at most once: :meth:`prepare` (same arguments), the
        executors' :meth:`tasks`, :meth:`written_files`, :meth:`commit`, for one table.
        ``before_commit`` runs right before the commit, once the files are written: a term that
        must still lead to commit (a one-off term's, ``tiering resync``) raises there."""
        prepared = self.prepare(table, splits, files, current, **round_args)
        if isinstance(prepared, TableCommit):
            return prepared
        results = self.write_files(self.tasks(prepared)).get(table.name, [])
        written = self.written_files(prepared, results)
        before_commit()
        return self.commit(prepared, written)

    def prepare(
        self,
        table: StoreTable,
        splits: Sequence[Split],
        files: Mapping[Split, Sequence[str]],
        current: LakeTable | None,
        *,
        epoch: CommitEpoch,
        round_id: int,
        lease_id: str,
        replace_table: bool = False,
        reader: BucketReader | None = None,
    ) -> PreparedRound | TableCommit:
        """``splits`` of ``table`` as round ``round_id`` under ``epoch`` (the term's job epoch, or in
        a tiering group the table's epoch: the type says which), planned per bucket;
        a skipped :class:`TableCommit` when the lake already has the round or it changes nothing.

        ``files`` maps every split to its Parquet files; with ``reader`` (a store without files a
        round may read, as Apache Fluss) it names none, and every bucket plan carries the reader,
        which reads the splits where the bucket is written. ``current`` is the Delta table as the
        round found it (None: none yet), read once by the caller. ``replace_table``: the table
        was re-created upstream (new ``table_id``), or is resynced; every existing file and the
        schema are replaced. Without it, a table another writer changed rows of since the job's
        last round commit is refused (:class:`ForeignCommitError`), before anything is written.
        """
        path = self._lake.path(table.name)
        app, version = app_id(self._writer_id, table.name), txn_version(epoch, round_id)
        dt = current.dt if current is not None else None
        info = current.info if current is not None else None
        done = current.transaction_version(app) if current is not None else None
        if done is not None and done >= version:
            log.info(
                "table=%s round %s already in the lake (at %s): skipped",
                table.name,
                (epoch, round_id),
                epoch_round(done),
            )
            return _skipped(table, dt, info)
        fenced = fence_epoch(dt, self._writer_id) if dt is not None else None
        if fenced is not None and fenced > epoch:
            raise FencedEpochError(
                f"table {table.name!r}: {self._writer_id} fenced the table at epoch {fenced}; round {round_id} of "
                f"epoch {epoch} refused",
                table=table.name,
                epoch=epoch,
            )
        if current is not None and current.foreign is not None and not replace_table:
            raise _foreign_commit(table.name, current.foreign, epoch)
        if dt is not None:  # after the replay and fence checks: a stale term changes nothing
            self._adjust_table(dt, epoch)
        added = _check_compatible(dt, table, info) if dt is not None and not replace_table else ()
        lake = info.position if info is not None and not replace_table else None
        lake_files = (
            current.files_by_bucket(table.primary_key[0], {s.bucket for s in splits})
            if current is not None and not replace_table
            else {}
        )
        plans = tuple(p for p in plan_buckets(table, splits, files, lake, lake_files, reader) if p.rewrites)
        if added:  # the schema changes in an overwrite of whole buckets: no rewrite by file
            plans = tuple(replace(p, lake_files=()) for p in plans)
        if not plans:
            return _skipped(table, dt, info)
        positions = dict(lake.buckets) if lake is not None else {}
        positions.update({p.bucket: p.position for p in plans})
        metadata = commit_metadata(
            job=self._writer_id,
            position=LakePosition(table.table_id, positions),
            epoch=epoch,
            round_id=round_id,
            lease_id=lease_id,
            snapshots={p.bucket: p.snapshot_id for p in plans if p.snapshot_id is not None},
            sort_key=table.primary_key[0],
        )
        prepared = PreparedRound(
            table,
            path,
            app,
            version,
            epoch,
            dt,
            replace_table,
            plans,
            positions,
            metadata,
            added,
            frozenset(lake_files),
        )
        return replace(prepared, write_path=self._write_path(prepared))

    @abstractmethod
    def _write_path(self, prepared: PreparedRound) -> WritePath:
        """Who writes ``prepared`` (its ``write_path`` is not set yet)."""

    def _adjust_table(self, dt: DeltaTable, epoch: int) -> None:
        """A table property this writer needs and ``dt`` lacks, set in a commit of its own before
        the round is checked against the table (which then sees that commit); none by default."""
        return None

    def tasks(self, prepared: PreparedRound) -> list[BucketTask]:
        """The bucket files executors write before :meth:`commit` ([]: not this round's path)."""
        return self._bucket_tasks(prepared) if prepared.write_path is WritePath.EXECUTORS else []

    def _bucket_tasks(self, prepared: PreparedRound) -> list[BucketTask]:
        return [
            BucketTask(
                prepared.table, prepared.path, plan, self._lake.store, self._target_file_bytes, self._lake.compression
            )
            for plan in prepared.plans
        ]

    def write_files(self, tasks: Sequence[BucketTask]) -> dict[str, list[BucketResult]]:
        """Run every table's tasks in one Spark job; the results by table name."""
        return run_bucket_tasks(self._spark, tasks)

    def written_files(self, prepared: PreparedRound, results: Sequence[BucketResult]) -> WrittenRound:
        """The round's files: those the executors wrote for :meth:`tasks` and those the driver
        writes now, for a round it writes itself. A failed bucket fails the table: its siblings'
        files are deleted and :class:`BucketWriteError` names every failure."""
        results = [*results, *self._driver_writes(prepared)]
        errors = [r.error for r in results if r.error is not None]
        written = [f for r in results for f in r.files]
        if errors:
            self._remove(prepared.path, written)
            name = prepared.table.name
            raise BucketWriteError(f"table {name!r}: writing the round's files failed: {'; '.join(errors)}", table=name)
        return WrittenRound(tuple(written), {r.bucket: r.replaced for r in results if r.replaced})

    def _driver_writes(self, prepared: PreparedRound) -> list[BucketResult]:
        """Bucket files this process writes itself right before the commit (none by default)."""
        return []

    def commit(self, prepared: PreparedRound, written: WrittenRound) -> TableCommit:
        """The table's one commit, with the :meth:`written_files` of the round; then the table is
        registered in the :attr:`catalog`, if any (a failure there is a warning, never the round's)."""
        result = self._commit(prepared, written)
        if self.catalog is not None:
            self.catalog.register(prepared.table.name, recreated=prepared.replace_table)
        return result

    @abstractmethod
    def _commit(self, prepared: PreparedRound, written: WrittenRound) -> TableCommit:
        """The table's one commit of ``written``, with the round's txn and metadata; when it
        raises, :meth:`_ensure_landed` decides what the error means."""

    def _remove(self, table_uri: str, written: Sequence[WrittenFile]) -> None:
        """Delete the files of a commit that did not land (nothing references them). Best
        effort: a store that refuses the delete too (it is often why the commit failed) leaves
        them to VACUUM, with a warning, and the round's own error is the one raised."""
        store = self._lake.store
        for f in written:
            try:
                store.filesystem.delete_file(store.path(f"{table_uri}/{f.path}"))
            except FileNotFoundError:
                pass
            except OSError as e:
                log.warning("unreferenced file %s/%s left to VACUUM: delete failed: %s", table_uri, f.path, e)

    def _landed(self, prepared: PreparedRound, rows_out: Callable[[Mapping[str, Any] | None], int]) -> TableCommit:
        """The result of our landed commit (writers do not return its version); ``rows_out``
        reads its commit info. The version after the handle's is read first, alone (one GET):
        it almost always is ours, and the handle is left as it is (the next round's update
        reads the commit anyway). Else the commit is found in the history: another commit may
        sit on top of it. Not the txn: delta-rs finds it by reading every commit since the
        last checkpoint again. The commit has landed: a store that fails the read of its
        history afterwards does not fail the table; the version is then the one the handle
        knows (a warning says so)."""
        committed = prepared.dt
        try:
            following = committed.version() + 1 if committed is not None else 0
            ours = round_commit_at(self._lake.store, prepared.path, following, self._writer_id, prepared.version)
            if ours is None:
                if committed is None:
                    committed = open_table(prepared.path, self._lake.store.delta_options())
                else:
                    committed.update_incremental()
                ours = (
                    find_round_commit(committed, self._writer_id, prepared.version) if committed is not None else None
                )
        except (OSError, DeltaError) as e:
            if committed is None:
                raise
            log.warning(
                "table=%s: committed; reading the commit back failed, its version taken as %d: %s",
                prepared.table.name,
                committed.version(),
                e,
            )
            ours = None
        if ours is not None:
            version = int(ours["version"])
        elif committed is not None:
            version = committed.version()
        else:
            raise LakeCommitError(
                f"table {prepared.table.name!r}: committed, yet no Delta table is at {prepared.path}",
                table=prepared.table.name,
                epoch=prepared.epoch,
            )
        return prepared.result(
            delta_version=version,
            rows_out=rows_out(ours),
        )

    def _ensure_landed(
        self, prepared: PreparedRound, error: Exception | None, cleanup: Callable[[], None] = lambda: None
    ) -> None:
        """Did our commit land? A commit may raise after its log entry was written, and delta-spark
        skips a write silently when the app id's version is already at or above ours. If it did
        not land, ``cleanup`` runs and the error says who won. When the log cannot be read
        either (the store is still failing), whether it landed is unknown: nothing is cleaned
        up (the files may be referenced) and the next round's plan, read from the lake's
        positions, settles it (the txn of a landed commit makes it re-plan only what is missing)."""
        try:
            after = open_table(prepared.path, self._lake.store.delta_options())
        except (OSError, DeltaError) as e:
            raise LakeCommitError(
                f"table {prepared.table.name!r}: Delta commit failed: {one_line(error or 'it raised nothing')}; "
                f"whether it landed could not be read from {prepared.path}: {one_line(e)}",
                table=prepared.table.name,
                epoch=prepared.epoch,
            ) from error
        done = after.transaction_version(prepared.app) if after is not None else None
        if done == prepared.version:
            return
        cleanup()
        name, epoch = prepared.table.name, prepared.epoch
        if done is not None and epoch_round(done)[0] > epoch:
            # the lake's own fence refused a stale term: say so where it happened, whatever the
            # caller makes of the error (the term's end, or in a group the table's move)
            log.warning(
                "table=%s epoch=%d round=%d: Delta commit refused by the lake: its txn is at epoch %d round %d",
                name,
                epoch,
                epoch_round(prepared.version)[1],
                *epoch_round(done),
            )
            raise FencedEpochError(
                f"table {name!r}: a newer term committed {epoch_round(done)} while epoch {epoch} was committing",
                code="FENCED_EPOCH",
                table=name,
                epoch=epoch,
            ) from error
        reason = (
            f"Delta commit failed: {one_line(error)}"
            if error is not None
            else (
                f"Delta skipped the write: the lake's txn version for {prepared.app!r} is {done} "
                f"({epoch_round(done) if done is not None else None}), the round's is {prepared.version}"
            )
        )
        raise LakeCommitError(f"table {name!r}: {reason}", table=name, epoch=epoch) from error


def _foreign_commit(table: str, commit: ForeignCommit, epoch: int) -> ForeignCommitError:
    return ForeignCommitError(
        f"table {table!r}: Delta version {commit.version} ({commit.operation}) was written by another writer and "
        f"changed the table's rows: the lake no longer follows the store, and no round is written on top of it; "
        f"repair: `tiering resync {shlex.quote(table)} --conf FILE` rebuilds the table from the store",
        version=commit.version,
        operation=commit.operation,
        table=table,
        epoch=epoch,
    )


def _skipped(table: StoreTable, dt: DeltaTable | None, info: LakeCommitInfo | None) -> TableCommit:
    return TableCommit(
        table=table.name,
        table_id=info.position.table_id if info is not None else table.table_id,
        delta_version=dt.version() if dt is not None else -1,
        positions=dict(info.position.buckets) if info is not None else {},
        skipped=True,
    )


def _check_compatible(dt: DeltaTable, table: StoreTable, info: LakeCommitInfo | None) -> tuple[str, ...]:
    """The Delta table must hold this incarnation, be partitioned by bucket and be able to follow
    the KV table's schema; the columns the round adds to it."""
    if info is not None and info.position.table_id != table.table_id:
        raise LakeCommitError(
            f"table {table.name!r}: the lake holds table_id {info.position.table_id}, the round is for "
            f"{table.table_id}; a re-created table needs replace_table=True",
            table=table.name,
        )
    partitioning = list(dt.metadata().partition_columns)
    if partitioning != [BUCKET_COLUMN]:
        raise SchemaMismatchError(
            f"table {table.name!r}: the Delta table at {dt.table_uri} is partitioned by {partitioning}, "
            f"expected [{BUCKET_COLUMN!r}]",
            table=table.name,
        )
    return added_columns(table.name, dt.table_uri, dt.schema(), Schema.from_arrow(lake_schema(table)))


def output_rows(commit: Mapping[str, Any] | None, metric: str) -> int:
    """Rows the commit wrote, from its ``operationMetrics`` (each writer names the metric)."""
    metrics = commit.get("operationMetrics", {}) if commit is not None else {}
    return int(metrics.get(metric, 0))


def post_commit(dt: DeltaTable) -> PostCommitHookProperties:
    """A round commit's hooks: a checkpoint every ``delta.checkpointInterval`` versions, and the
    log cleanup with it only. delta-rs otherwise cleans after every commit, and a cleanup lists
    the whole ``_delta_log`` (on S3 a LIST request per thousand entries, per table per round),
    though what it may delete (entries past the log retention and older than the newest
    checkpoint) grows by a checkpoint at a time. At a checkpoint the table's own
    ``delta.enableExpiredLogCleanup`` decides, as it would."""
    interval = int(dt.metadata().configuration.get(CHECKPOINT_INTERVAL_PROPERTY, DELTA_RS_CHECKPOINT_INTERVAL))
    due = (dt.version() + 1) % interval == 0
    return PostCommitHookProperties(create_checkpoint=True, cleanup_expired_logs=None if due else False)
