"""The baseline the changelog and amplification benchmarks set a round against: the same changes
MERGEd by hand into a plain Delta table with delta-rs.

Failure mode it exists for: a baseline that does less than the round it is compared with (only
the rows, not the newest change per key; another Parquet codec; fewer columns, a table laid out
otherwise, deletes ignored), which flatters the baseline. Its target is the lake's table shape:
the user columns and the lake's system columns (``__bucket``, ``__offset``, ``__timestamp``),
partitioned by ``__bucket``. It reads each bucket's changes from the store's log segments with
their ``__op``, keeps the newest per key, and ``DeltaTable.merge``s them with the writer
properties it is given: a delete removes the row, any other change upserts it.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from benchmarks.common import CHUNK, SCHEMA, rows
from tiering.delta_log.layout import BUCKET_COLUMN, SYSTEM_COLUMNS
from tiering.kvstore.protocol import DELETE, OFFSET_COLUMN, OP_COLUMN, TIMESTAMP_COLUMN

#: The benchmark table's user columns, and every column of the lake's.
USER_COLUMNS = [c["name"] for c in SCHEMA]
LAKE_COLUMNS = [*USER_COLUMNS, *SYSTEM_COLUMNS]
#: What a round writes of a kept change: every lake column from the newest change.
_FROM_SOURCE = {c: f"s.{c}" for c in LAKE_COLUMNS}
_DELETED = f"s.{OP_COLUMN} = '{DELETE}'"


class ChangelogRounds:
    """The changelog benchmark's two sides over the same store table: U upserts at a time, then
    the service's round of them and a hand-written MERGE of the same changes (written with
    ``writer_properties``: None is delta-rs's default, snappy)."""

    def __init__(self, args, work: Path, client, writer_properties=None) -> None:
        self.args, self.client = args, client
        self.writer_properties = writer_properties
        self.target = str(work / "merge-target")
        self.rng = random.Random(7)
        self.salt = 0

    def create_target(self, snapshots) -> None:
        """The baseline's target: the rows of ``snapshots`` (the store's, as the round bootstrapped
        from them) in the lake's columns and partitions."""
        from deltalake import write_deltalake

        base = pa.concat_tables(
            _in_bucket(pq.read_table(f, columns=[*USER_COLUMNS, OFFSET_COLUMN, TIMESTAMP_COLUMN]), s.bucket)
            for s in snapshots.buckets
            for f in s.files
        )
        write_deltalake(
            self.target,
            base.select(LAKE_COLUMNS),
            partition_by=[BUCKET_COLUMN],
            writer_properties=self.writer_properties,
        )

    def updates(self) -> list[pa.Table]:
        """The next U upserts, built before any is written (each write changes distinct keys;
        writes overlap each other)."""
        chunks, made = [], 0
        while made < self.args.updates:
            self.salt += 1
            n = min(self.args.keys, self.args.updates - made, CHUNK)
            chunks.append(rows(pa.array(self.rng.sample(range(self.args.keys), n), pa.int64()), self.salt))
            made += n
        return chunks

    def ends(self) -> dict[int, int]:
        return {b.bucket: b.log_end_offset for b in self.client.log_info("cl").buckets}

    def write(self, chunks: list[pa.Table]) -> tuple[dict[int, int], int]:
        """Write ``chunks``; each bucket's log end before them, and the changes they made."""
        before = self.ends()
        for chunk in chunks:
            self.client.write_arrow("cl", chunk)
        return before, sum(end - before[b] for b, end in self.ends().items())

    def merge(self, before: dict[int, int]) -> tuple[float, int]:
        """The baseline: read each bucket's changes since ``before`` from the log segments, keep
        the newest per key, MERGE them into the target (deletes delete); seconds, and the keys
        merged."""
        from deltalake import DeltaTable

        started = time.perf_counter()
        latest = pa.concat_tables(
            self._newest(b.bucket, before[b.bucket], b.log_end_offset) for b in self.client.log_info("cl").buckets
        )
        (
            DeltaTable(self.target)
            .merge(
                latest,
                predicate=f"t.{BUCKET_COLUMN} = s.{BUCKET_COLUMN} AND t.id = s.id",
                source_alias="s",
                target_alias="t",
                writer_properties=self.writer_properties,
            )
            .when_matched_delete(predicate=_DELETED)
            .when_matched_update(updates=_FROM_SOURCE)
            .when_not_matched_insert(updates=_FROM_SOURCE, predicate=f"NOT ({_DELETED})")
            .execute()
        )
        return time.perf_counter() - started, latest.num_rows

    def check_same_rows(self, lake: pa.Table) -> None:
        """Raise unless the target holds the rows of ``lake`` (the tiered table), every lake
        column alike: two sides that end apart did not do the same work."""
        from tests.support.lake import delta_rows

        ours, theirs = (t.select(LAKE_COLUMNS).sort_by("id") for t in (delta_rows(self.target), lake))
        if not ours.equals(theirs):
            sizes = f"{ours.num_rows} rows against {theirs.num_rows}"
            raise RuntimeError(f"benchmark: the MERGE target differs from the lake ({sizes})")

    def _newest(self, bucket: int, start: int, end: int) -> pa.Table:
        """The newest change per key of ``bucket`` in offsets ``[start, end)``, with its ``__op``."""
        log = pa.concat_tables(
            read.filter(pc.greater_equal(read[OFFSET_COLUMN], pa.scalar(start, pa.int64())))
            for seg in self.client.log_segments("cl", bucket, start, end)
            for read in [pq.read_table(seg.file, columns=[*USER_COLUMNS, OFFSET_COLUMN, TIMESTAMP_COLUMN, OP_COLUMN])]
        )
        newest = log.group_by("id").aggregate([(OFFSET_COLUMN, "max")])
        kept = log.join(
            newest, keys=["id", OFFSET_COLUMN], right_keys=["id", f"{OFFSET_COLUMN}_max"], join_type="inner"
        )
        return _in_bucket(kept, bucket)


def _in_bucket(table: pa.Table, bucket: int) -> pa.Table:
    """``table`` with the lake's ``__bucket`` column: ``bucket`` in every row."""
    return table.append_column(BUCKET_COLUMN, pc.fill_null(pa.nulls(table.num_rows, pa.int32()), bucket))
