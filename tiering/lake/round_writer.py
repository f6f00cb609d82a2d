"""Committing one table's round to Delta with delta-rs (no Delta JVM jars needed).

The protocol (replays skipped, schema checked, epochs fenced) is :mod:`tiering.lake.round_protocol`;
this is the delta-rs commit, made by the driver, on any storage the lake is on (a local
directory or S3, where delta-rs commits with a conditional put). Failure modes of its own:
- a stale term races a newer one: delta-rs's conflict checker (or the store's conditional put,
  for the same version) rejects the later commit (``ConcurrentTransaction`` for the same app id,
  or ``ConcurrentDeleteRead`` since every rewrite removes files); the loser's files are deleted
  and nothing of it lands;
- a crash between writing files and committing -> unreferenced files in bucket directories;
  a lost race leaves them too on the MERGE path (delta-rs writes into the table, then commits).
  Both are removed by a full ``VACUUM`` (``vacuum(full=True)``) once past its retention.

Two data paths, one commit each:
- copy-on-write per bucket (Hudi-style): every bucket the round touches is rewritten entirely
  by Spark executors, which write the files straight into the table location and return their
  add actions (see :mod:`tiering.lake.bucket_files`); then one commit removes exactly those
  buckets' old files and adds the new ones. Partitioning by ``__bucket`` keeps that a metadata
  operation on the other buckets. Used for bootstraps and big rounds: no row passes through
  the driver;
- a changelog-only round of at most ``merge_max_changes`` changes is a delta-rs MERGE run by
  the driver (see :mod:`tiering.lake.log_merge`): no Spark job, and only the files holding a
  changed key are rewritten. Its driver memory is bounded by that count.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from deltalake import Schema
from deltalake.transaction import CommitProperties, Transaction, create_table_with_add_actions
from pyspark.sql import SparkSession

from tiering.conf.model import DEFAULT_MERGE_MAX_CHANGES
from tiering.lake.bucket_files import BucketTask, WrittenFile
from tiering.lake.log_merge import latest_changes, merge_changes
from tiering.lake.round_protocol import PreparedRound, RoundWriter, TableCommit, output_rows
from tiering.lakestate.lake import Lake
from tiering.lakestate.layout import BUCKET_COLUMN, lake_schema

__all__ = ["TableCommit", "DeltaRsRoundWriter"]

log = logging.getLogger(__name__)

_MERGE_ROWS = "num_output_rows"  # delta-rs MERGE metric: rows in the files it wrote


class DeltaRsRoundWriter(RoundWriter):
    """Writes rounds with Spark or a driver-side MERGE (data) and delta-rs (the commit)."""

    def __init__(
        self, spark: SparkSession, lake: Lake, job: str, *, merge_max_changes: int = DEFAULT_MERGE_MAX_CHANGES
    ) -> None:
        super().__init__(spark, lake, job)
        self._merge_max_changes = merge_max_changes

    def tasks(self, prepared: PreparedRound) -> list[BucketTask]:
        """One task per bucket, unless the round is merged by the driver (no files first)."""
        if self._merges(prepared):
            return []
        return [BucketTask(prepared.table, prepared.path, plan, self._lake.store) for plan in prepared.plans]

    def _commit(self, prepared: PreparedRound, written: Sequence[WrittenFile]) -> TableCommit:
        if self._merges(prepared):
            return self._merge(prepared)
        return self._add(prepared, written)

    def _merges(self, prepared: PreparedRound) -> bool:
        """Only buckets already in the lake (so the table exists and is not being replaced),
        each planned because it has changes, and few enough of them for the driver."""
        return (
            all(p.base == "lake" for p in prepared.plans)
            and sum(p.num_changes for p in prepared.plans) <= self._merge_max_changes
        )

    def _merge(self, prepared: PreparedRound) -> TableCommit:
        changes = latest_changes(prepared.table, prepared.plans)
        try:
            metrics = merge_changes(prepared.dt, prepared.table, changes, _commit_properties(prepared))
        except Exception as e:
            self._ensure_landed(prepared, e)
            return self._landed(prepared, rows_out=lambda commit: output_rows(commit, _MERGE_ROWS))
        # the MERGE moved prepared.dt to the version it committed: no reload, no history scan
        return prepared.result(delta_version=prepared.dt.version(), rows_out=int(metrics[_MERGE_ROWS]))

    def _add(self, prepared: PreparedRound, written: Sequence[WrittenFile]) -> TableCommit:
        """One commit replacing the round's buckets with the files the executors wrote."""
        table, path, dt = prepared.table, prepared.path, prepared.dt
        adds = [f.add_action() for f in written]
        properties = _commit_properties(prepared)
        schema = Schema.from_arrow(lake_schema(table))
        try:
            if dt is None:
                create_table_with_add_actions(
                    path, schema, adds, mode="error", partition_by=[BUCKET_COLUMN], commit_properties=properties,
                    storage_options=self._lake.store.delta_options(),
                )
            else:
                filters = None if prepared.replace_table else [(BUCKET_COLUMN, "in", [str(p.bucket) for p in prepared.plans])]
                dt.create_write_transaction(
                    adds, "overwrite", schema, partition_by=[BUCKET_COLUMN], partition_filters=filters,
                    commit_properties=properties,
                )
        except Exception as e:
            self._ensure_landed(prepared, e, cleanup=lambda: self._remove(path, written))
        return self._landed(prepared, rows_out=lambda _: sum(f.num_records for f in written))


def _commit_properties(prepared: PreparedRound) -> CommitProperties:
    """Round metadata and the ``(app, version)`` txn that makes the commit idempotent and fenced."""
    return CommitProperties(
        custom_metadata=dict(prepared.metadata),
        app_transactions=[Transaction(prepared.app, prepared.version)],
    )

