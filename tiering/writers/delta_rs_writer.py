"""Committing one table's round to Delta with delta-rs (no Delta JVM jars needed).

The protocol (replays skipped, schema checked, epochs fenced) is :mod:`tiering.writers.round_writer`;
this is the delta-rs commit, made by the driver, on any storage the lake is on (a local
directory or S3, where delta-rs commits with a conditional put). Failure modes of its own:
- a stale term races a newer one: delta-rs's conflict checker (or the store's conditional put,
  for the same version) rejects the later commit (``ConcurrentTransaction`` for the same app id,
  or ``ConcurrentDeleteRead`` since every rewrite removes files); the loser's files are deleted
  and nothing of it lands;
- two writers create the table at once (a zombie and the new leader replaying a first
  bootstrap, the old and the new owner of a group's table): the conditional put of version 0
  lets one CREATE land; the other's commit is made without retries, since delta-rs retries a
  lost CREATE as the next version with no conflict check (deltalake 1.6.6), which would put
  every row of the bootstrap in the table twice. It fails instead, as any commit that lost:
  :class:`FencedEpochError` when a newer term won, else :class:`LakeCommitError` (the round is
  planned again from the lake, which holds the winner's commit);
- a table whose files may carry deletion vectors (delta-spark's MERGE wrote them; see
  :mod:`tiering.writers.delta_spark_merge`): a rewrite reads a lake file's Parquet as it is and
  would bring back the rows a vector deleted -> :class:`LakeCommitError` naming ``lake.writer``,
  before anything is written, for any round that changes rows already in the lake;
- a crash between writing files and committing -> unreferenced files in bucket directories,
  removed by a full ``VACUUM`` (``vacuum(full=True)``) once past its retention;
- the KV table gained a column: the commit carries the new schema. ``create_write_transaction``
  in overwrite mode compares the schema it is given with the table's and, when they differ, puts
  a ``metaData`` action in the same log entry as the round's ``add``/``remove`` actions and its
  ``txn`` (delta-rs 1.6.6, ``RawDeltaTable.create_write_transaction``). So the schema changes
  exactly when the round's data lands, and a replayed round is skipped as a whole by its txn
  version. (``DeltaTable.alter.add_columns`` would be a commit of its own, without the round's
  txn: a crash between the two would leave the lake evolved but the round not done.) A stale
  term racing a newer one is refused as above, schema change or not.

One data path, copy-on-write per file (Hudi-style): in every bucket the round touches, the files
whose key range could hold a changed key are rewritten (see :mod:`tiering.writers.buckets`),
sorted and split at ``lake.target_file_mb``, straight into the table location; then one commit
removes exactly those files (``remove`` actions, ``dataChange`` true) and adds their replacements
— the round's cost follows its changes, not the table's size. A bootstrap replaces its bucket's
files, all of them. The stale-term race above still conflicts: a newer round removed files this
one read (``ConcurrentDeleteRead``), or carries the same app id (``ConcurrentTransaction``). A
round that adds columns replaces its buckets whole instead (``overwrite`` with the buckets as
partition filters): only that mode carries the new schema in the round's log entry, and it
derives its removes itself. Who writes:
- Spark executors, for bootstraps and big rounds: no row passes through the driver;
- the driver itself, for a changelog-only round of at most ``lake.driver_max_changes`` changes
  (docs/DESIGN.md §6: changelog merges may pass through the driver, bounded): no Spark job for a round
  that changed a few rows. The bucket's base streams through in batches; the changes are held.
Which of them is decided once per table per round (:class:`~tiering.writers.round_writer.WritePath`).

With ``lake.change_data_feed`` on, tables are created with the feed enabled (an existing table
gets it in a commit of its own before its next round), and a round that changes rows already in
the lake is not a rewrite but one delta-rs MERGE made by the driver, its source bounded by
``lake.merge_max_rows`` (see :mod:`tiering.writers.change_feed` for why, and what the feed then
holds). That commit carries the same txn and commit metadata, so it is as idempotent and fenced
as a rewrite: it is planned on the version the round was checked against, and a concurrent
commit (a newer term's round, a maintenance fence) makes it conflict.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from deltalake import DeltaTable, Schema
from deltalake.transaction import CommitProperties, RemoveAction, Transaction, create_table_with_add_actions
from pyspark.sql import SparkSession

from tiering.conf.defaults import DEFAULT_DRIVER_MAX_CHANGES, DEFAULT_MERGE_MAX_ROWS, DEFAULT_TARGET_FILE_MB
from tiering.delta_log.commits import maintenance_metadata
from tiering.delta_log.lake import Lake, has_deletion_vectors
from tiering.delta_log.layout import BUCKET_COLUMN, DELETION_VECTORS_FEATURE, lake_schema
from tiering.errors import LakeCommitError
from tiering.writers.bucket_plan import BucketBase, heavy
from tiering.writers.buckets import BucketResult, run_task
from tiering.writers.change_feed import CHANGE_FEED_PROPERTY, check_source_rows, feed_enabled, merge_round, needs_merge
from tiering.writers.round_writer import (
    PreparedRound,
    RoundWriter,
    TableCommit,
    WritePath,
    WrittenRound,
    output_rows,
    post_commit,
)

__all__ = ["TableCommit", "DeltaRsRoundWriter"]

log = logging.getLogger(__name__)

#: Buckets of one table the driver writes at once, for a round it writes itself.
_DRIVER_BUCKET_THREADS = 4
#: Tables whose heavy round (:func:`~tiering.writers.bucket_plan.heavy`) the driver writes at once: each holds up to
#: :data:`_DRIVER_BUCKET_THREADS` rewrites in memory, and a round runs ``lake.table_parallelism``
#: tables at a time (32 on S3), so the rewrites the driver holds stay at eight however many
#: tables wait on the object store beside them.
DRIVER_BIG_TABLES = 2


class DeltaRsRoundWriter(RoundWriter):
    """Writes the buckets' files on the executors (or, for small changelog rounds, in the driver)
    and commits them with delta-rs."""

    def __init__(
        self,
        spark: SparkSession,
        lake: Lake,
        writer_id: str,
        *,
        driver_max_changes: int = DEFAULT_DRIVER_MAX_CHANGES,
        merge_max_rows: int = DEFAULT_MERGE_MAX_ROWS,
        change_data_feed: bool = False,
        target_file_mb: int = DEFAULT_TARGET_FILE_MB,
    ) -> None:
        super().__init__(spark, lake, writer_id)
        self._target_file_bytes = target_file_mb * 1024 * 1024
        self._driver_max_changes = driver_max_changes
        self._merge_max_rows = merge_max_rows
        self._change_data_feed = change_data_feed
        self._big_rounds = threading.BoundedSemaphore(DRIVER_BIG_TABLES)

    def _adjust_table(self, dt: DeltaTable, epoch: int) -> None:
        """With the feed on, a table created without it gets it (only later versions have a feed)."""
        if self._change_data_feed and not feed_enabled(dt):
            metadata = maintenance_metadata(job=self._writer_id, epoch=epoch, operation="enable change data feed")
            dt.alter.set_table_properties(
                {CHANGE_FEED_PROPERTY: "true"},
                raise_if_not_exists=False,
                commit_properties=CommitProperties(custom_metadata=metadata),
            )

    def _driver_writes(self, prepared: PreparedRound) -> list[BucketResult]:
        """The round's buckets written by this process, a few at a time (pyarrow and the
        object store release the GIL) when the round is heavy, and then waits for one of
        :data:`DRIVER_BIG_TABLES`; a light one runs its buckets one after the other: a few rows
        in small files cost less than the threads (the round already commits
        ``lake.table_parallelism`` tables at once). 1,000 changes spread over a 20M-row table
        rewrite every one of its 135 files, ~50 ms each, which one thread took 8 s to do."""
        if prepared.write_path is not WritePath.DRIVER:
            return []
        tasks = self._bucket_tasks(prepared)
        if not heavy(prepared.plans):
            return [run_task(task) for task in tasks]
        with (
            self._big_rounds,
            ThreadPoolExecutor(min(len(tasks), _DRIVER_BUCKET_THREADS), thread_name_prefix="bucket") as pool,
        ):
            return list(pool.map(run_task, tasks))

    def _write_path(self, prepared: PreparedRound) -> WritePath:
        """A MERGE when the feed must record the round's changes; the driver for only buckets
        already in the lake (so no bootstrap, no replaced table), each planned because it has
        changes, and few enough changes for the driver; else the executors. Refused for a
        round that changes lake rows of a table with deletion vectors (see the module doc)."""
        if prepared.dt is not None and needs_merge(prepared) and has_deletion_vectors(prepared.dt):
            name = prepared.table.name
            raise LakeCommitError(
                f"table {name!r}: its files may carry deletion vectors (the reader feature "
                f'{DELETION_VECTORS_FEATURE!r}: delta-spark\'s MERGE, lake.delta_spark_write = "merge", wrote '
                "them), which the delta-rs writer's rewrite does not apply: it would bring deleted rows back; "
                'tier this lake with lake.writer = "delta-spark"',
                table=name,
                epoch=prepared.epoch,
            )
        if self._change_data_feed and needs_merge(prepared):
            return WritePath.DRIVER_MERGE
        if (
            all(p.base is BucketBase.LAKE for p in prepared.plans)
            and sum(p.num_changes for p in prepared.plans) <= self._driver_max_changes
        ):
            return WritePath.DRIVER
        return WritePath.EXECUTORS

    def _commit(self, prepared: PreparedRound, written: WrittenRound) -> TableCommit:
        if prepared.write_path is WritePath.DRIVER_MERGE:
            return self._merge(prepared)
        return self._replace_buckets(prepared, written)

    def _merge(self, prepared: PreparedRound) -> TableCommit:
        """The round as one MERGE (its files are written by delta-rs inside the commit)."""
        tasks = self._bucket_tasks(prepared)
        check_source_rows(prepared, tasks, self._merge_max_rows)
        try:
            merge_round(prepared, tasks, _commit_properties(prepared), self._lake.compression)
        except Exception as e:
            self._ensure_landed(prepared, e)
        return self._landed(prepared, lambda commit: output_rows(commit, "num_output_rows"))

    def _replace_buckets(self, prepared: PreparedRound, written: WrittenRound) -> TableCommit:
        """One commit replacing the files the round rewrote with the files written for them."""
        table, path, dt = prepared.table, prepared.path, prepared.dt
        adds = [f.add_action() for f in written.files]
        properties = _commit_properties(prepared)
        schema = Schema.from_arrow(lake_schema(table))
        try:
            if dt is None:
                create_table_with_add_actions(
                    path,
                    schema,
                    adds,
                    mode="error",
                    partition_by=[BUCKET_COLUMN],
                    commit_properties=_commit_properties(prepared, retries=0),
                    configuration={CHANGE_FEED_PROPERTY: "true"} if self._change_data_feed else None,
                    storage_options=self._lake.store.delta_options(),
                )
            elif prepared.replace_table or prepared.added_columns:
                filters = (
                    None if prepared.replace_table else [(BUCKET_COLUMN, "in", [str(p.bucket) for p in prepared.plans])]
                )
                dt.create_write_transaction(
                    [*adds],
                    "overwrite",
                    schema,
                    partition_by=[BUCKET_COLUMN],
                    partition_filters=filters,
                    commit_properties=properties,
                    post_commithook_properties=post_commit(dt),
                )
            else:
                dt.create_write_transaction(
                    [*adds, *_removes(prepared, written.replaced)],
                    "append",
                    schema,
                    partition_by=[BUCKET_COLUMN],
                    commit_properties=properties,
                    post_commithook_properties=post_commit(dt),
                )
        except Exception as e:
            self._ensure_landed(prepared, e, cleanup=lambda: self._remove(path, written.files))
        return self._landed(prepared, rows_out=lambda _: sum(f.num_records for f in written.files))


def _removes(prepared: PreparedRound, replaced: Mapping[int, Sequence[str]]) -> list[RemoveAction]:
    """The lake files the round replaces: those a rewrite by file rewrote (``replaced``, by
    bucket), every file of any other bucket it writes (a bootstrap replaces the bucket)."""
    now = int(time.time() * 1000)
    removes = []
    for plan in prepared.plans:
        rewritten = set(replaced.get(plan.bucket, ())) if plan.by_file else None
        for f in plan.lake_files:
            if rewritten is None or f.path in rewritten:
                removes.append(RemoveAction(f.path, True, now, f.size, {BUCKET_COLUMN: str(plan.bucket)}))
    return removes


def _commit_properties(prepared: PreparedRound, *, retries: int | None = None) -> CommitProperties:
    """Round metadata and the ``(app, version)`` txn that makes the commit idempotent and fenced;
    ``retries``: how often delta-rs may commit again at a later version after losing one (its
    default when None). A table's first commit takes 0: delta-rs retries a lost CREATE at the
    next version without checking it against the winner, so it would land beside the other
    writer's version 0 (every row of the bootstrap twice) instead of failing."""
    return CommitProperties(
        custom_metadata=dict(prepared.metadata),
        max_commit_retries=retries,
        app_transactions=[Transaction(prepared.app, prepared.version)],
    )
