"""A table's change data feed (``lake.change_data_feed``): what a round writes so that Delta's
change feed holds exactly the round's changes (docs/DESIGN.md §6).

Failure mode this guards against: a feed that reports what the writer did instead of what
changed. A Delta change-feed reader takes a commit's ``cdc`` files when it has any; without them
it reads every row of every removed file as a delete and every row of every added file as an
insert. The bucket rewrite (:mod:`tiering.writers.buckets`) removes and re-adds whole buckets
with add actions only (delta-rs's ``create_write_transaction`` takes no ``cdc`` action), so its
feed would name every row of every touched bucket. Hence, with the feed on:

- a round that only adds rows to buckets holding none in the lake (a table's first round, a
  bucket's first bootstrap) keeps the rewrite: its commit removes nothing, so its add actions
  read as exactly the inserted rows, and no row passes through the driver;
- every other round is one delta-rs MERGE made by the driver (:func:`merge_round`), which writes
  ``_change_data`` files: ``insert``, ``update_preimage``/``update_postimage`` and ``delete``
  (delta-rs 1.6.6). Its source is the newest change per key of each changelog bucket, and the
  whole new content of each bootstrap bucket: rows whose ``__offset`` equals the lake's are the
  same row and left alone, the lake's rows the snapshot lacks are deleted (``WHEN NOT MATCHED BY
  SOURCE``, only in those buckets), so a re-bootstrap records only the net differences. A key
  the round did not change is copied, never recorded; a delete of an absent key records nothing;
- a re-created table (``replace_table``) keeps the rewrite: the feed reads every row of the old
  incarnation as deleted and every row of the new one as inserted.

Memory: DataFusion builds the MERGE's join from its source, so the driver holds the source's
rows (the changes, and the whole content of bootstrap buckets already in the lake). A round
whose source exceeds ``lake.merge_max_rows`` rows fails with :class:`LakeCommitError` naming
both keys, before anything is written, instead of running the driver out of memory.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.transaction import CommitProperties

from tiering.delta_log.layout import BUCKET_COLUMN, lake_schema
from tiering.errors import LakeCommitError
from tiering.kvstore.contract import DELETE, OFFSET_COLUMN, OP_COLUMN
from tiering.writers.bucket_plan import BucketBase
from tiering.writers.buckets import BucketTask, base_rows, merge_batches
from tiering.writers.compression import delta_rs_properties
from tiering.writers.round_writer import PreparedRound, post_commit

__all__ = ["CHANGE_FEED_PROPERTY", "check_source_rows", "feed_enabled", "merge_round", "needs_merge"]

#: The Delta table property that makes writers record the change data feed.
CHANGE_FEED_PROPERTY = "delta.enableChangeDataFeed"


def feed_enabled(dt: DeltaTable) -> bool:
    return dt.metadata().configuration.get(CHANGE_FEED_PROPERTY) == "true"


def needs_merge(prepared: PreparedRound) -> bool:
    """Whether the round changes rows already in the lake (see the module doc)."""
    return not prepared.replace_table and any(p.bucket in prepared.lake_buckets for p in prepared.plans)


def check_source_rows(prepared: PreparedRound, tasks: Sequence[BucketTask], max_rows: int) -> None:
    """:class:`LakeCommitError` when the MERGE source of the round's buckets (``tasks``) would
    exceed ``max_rows`` rows (snapshot rows are counted from their Parquet footers)."""
    rows = sum(t.plan.num_changes + (base_rows(t) if t.plan.base is BucketBase.SNAPSHOT else 0) for t in tasks)
    if rows > max_rows:
        name = prepared.table.name
        raise LakeCommitError(
            f"table {name!r}: with lake.change_data_feed on, this round is one MERGE whose source the driver holds: "
            f"{rows} rows, more than lake.merge_max_rows = {max_rows}; raise lake.merge_max_rows (driver "
            "memory allowing) or bound rounds with limits.max_bytes_per_trigger",
            table=name,
            epoch=prepared.epoch,
        )


def merge_round(
    prepared: PreparedRound, tasks: Sequence[BucketTask], properties: CommitProperties, compression: str
) -> Mapping[str, Any]:
    """The round's buckets (``tasks``) as one MERGE into ``prepared.dt`` (at the version the
    round was planned on, so a concurrent commit conflicts), its files and ``_change_data``
    files compressed with ``compression`` (``lake.compression``); its metrics."""
    assert prepared.dt is not None, "a MERGE needs a table"
    schema = lake_schema(prepared.table).append(pa.field(OP_COLUMN, pa.string()))
    source = pa.RecordBatchReader.from_batches(schema, _source(tasks, schema))
    delete, offset = f"s.{_name(OP_COLUMN)} = '{DELETE}'", _name(OFFSET_COLUMN)
    merger = (
        prepared.dt.merge(
            source,
            _predicate(prepared),
            source_alias="s",
            target_alias="t",
            merge_schema=bool(prepared.added_columns),
            commit_properties=properties,
            writer_properties=delta_rs_properties(compression),
            post_commithook_properties=post_commit(prepared.dt),
        )
        .when_matched_delete(delete)
        .when_matched_update_all(predicate=f"NOT ({delete}) AND t.{offset} <> s.{offset}", except_cols=[OP_COLUMN])
        .when_not_matched_insert_all(predicate=f"NOT ({delete})", except_cols=[OP_COLUMN])
    )
    rebootstrapped = [
        p.bucket for p in prepared.plans if p.base is BucketBase.SNAPSHOT and p.bucket in prepared.lake_buckets
    ]
    if rebootstrapped:
        merger = merger.when_not_matched_by_source_delete(f"t.{_name(BUCKET_COLUMN)} IN ({_list(rebootstrapped)})")
    return merger.execute()


def _source(tasks: Sequence[BucketTask], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    for task in tasks:
        yield from merge_batches(task, schema)


def _predicate(prepared: PreparedRound) -> str:
    """Same bucket and key; the explicit bucket list lets delta-rs scan only the round's buckets."""
    bucket = _name(BUCKET_COLUMN)
    keys = [bucket, *map(_name, prepared.table.primary_key)]
    return f"t.{bucket} IN ({_list(p.bucket for p in prepared.plans)}) AND " + " AND ".join(
        f"t.{k} = s.{k}" for k in keys
    )


def _name(column: str) -> str:
    """A column as a quoted SQL identifier (keys may be mixed case or hold spaces)."""
    return '"' + column.replace('"', '""') + '"'


def _list(buckets: Iterator[int] | Sequence[int]) -> str:
    return ", ".join(str(b) for b in buckets)
