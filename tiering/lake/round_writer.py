"""Committing one table's round to Delta with delta-rs (no Delta JVM jars needed).

The protocol (replays skipped, schema checked, epochs fenced) is :mod:`tiering.lake.round_protocol`;
this is the delta-rs commit. Failure modes of its own:
- a stale term races a newer one: delta-rs's conflict checker rejects the later commit
  (``ConcurrentTransaction`` for the same app id, or ``ConcurrentDeleteRead`` since every
  rewrite removes files); the loser's moved files are deleted and nothing of it lands;
- a crash between writing files and committing -> orphan files in bucket directories
  (unreferenced; a full ``VACUUM`` removes them) and a staging directory (removed after a day);
  a lost race leaves them too on the MERGE path (delta-rs writes into the table, then commits),
  while the rewrite path deletes its moved files at once.

Two data paths, one commit each:
- copy-on-write per bucket (Hudi-style): every bucket the round touches is rewritten entirely
  by Spark executors (see :mod:`tiering.lake.bucket_rows`), then one commit removes exactly
  those buckets' old files and adds the new ones. Partitioning by ``__bucket`` keeps that a
  metadata operation on the other buckets. Used for bootstraps and big rounds: the rows stay
  in Spark;
- a changelog-only round of at most ``merge_max_changes`` changes is a delta-rs MERGE run by
  the driver (see :mod:`tiering.lake.log_merge`): no Spark job, and only the files holding a
  changed key are rewritten. Its driver memory is bounded by that count.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Sequence

from deltalake import Schema
from deltalake.transaction import CommitProperties, Transaction, create_table_with_add_actions
from pyspark.sql import SparkSession

from tiering.conf.model import DEFAULT_MERGE_MAX_CHANGES
from tiering.errors import LakeCommitError
from tiering.kvstore.models import TableInfo
from tiering.lake import staging
from tiering.lake.bucket_rows import bucket_rows
from tiering.lakestate.layout import BUCKET_COLUMN, lake_schema
from tiering.lake.log_merge import latest_changes, merge_changes
from tiering.lake.round_plan import BucketPlan
from tiering.lake.round_protocol import PreparedRound, RoundWriter, TableCommit, output_rows
from tiering.lakestate.lake import Lake

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

    def _commit(self, prepared: PreparedRound) -> TableCommit:
        if self._merges(prepared):
            return self._merge(prepared)
        return self._rewrite(prepared)

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

    def _rewrite(self, prepared: PreparedRound) -> TableCommit:
        table, path, dt = prepared.table, prepared.path, prepared.dt
        staging.clean_stale(path)
        stage = staging.new_staging_dir(path)
        try:
            self._write_rows(table, prepared.plans, stage)
            adds = staging.move_into_table(stage, path)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
        properties = _commit_properties(prepared)
        schema = Schema.from_arrow(lake_schema(table))
        try:
            if dt is None:
                create_table_with_add_actions(
                    path, schema, adds, mode="error", partition_by=[BUCKET_COLUMN], commit_properties=properties
                )
            else:
                filters = None if prepared.replace_table else [(BUCKET_COLUMN, "in", [str(p.bucket) for p in prepared.plans])]
                dt.create_write_transaction(
                    adds, "overwrite", schema, partition_by=[BUCKET_COLUMN], partition_filters=filters,
                    commit_properties=properties,
                )
        except Exception as e:
            self._ensure_landed(prepared, e, cleanup=lambda: staging.remove_files(path, adds))
        return self._landed(prepared, rows_out=lambda _: sum(_num_records(a.stats) for a in adds))

    def _write_rows(self, table: TableInfo, plans: Sequence[BucketPlan], stage: str) -> None:
        """Spark writes the buckets' rows into ``stage`` (one job: nothing else reads the inputs)."""
        rows = bucket_rows(self._spark, table, plans)
        if rows is not None:
            try:
                rows.write.mode("error").partitionBy(BUCKET_COLUMN).parquet(stage)
            except Exception as e:
                raise LakeCommitError(f"table {table.name!r}: writing the round's files failed: {e}", table=table.name) from e


def _commit_properties(prepared: PreparedRound) -> CommitProperties:
    """Round metadata and the ``(app, version)`` txn that makes the commit idempotent and fenced."""
    return CommitProperties(
        custom_metadata=dict(prepared.metadata),
        app_transactions=[Transaction(prepared.app, prepared.version)],
    )


def _num_records(stats: str) -> int:
    return int(json.loads(stats)["numRecords"])
