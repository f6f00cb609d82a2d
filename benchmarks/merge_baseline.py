"""The baseline the changelog and amplification benchmarks set a round against: the same changes
MERGEd by hand into a plain Delta table with delta-rs.

Failure mode it exists for: a baseline that does less than the round it is compared with (only
the rows, not the newest change per key; another Parquet codec), which flatters the baseline.
It reads each bucket's changes from the store's log segments, keeps the newest per key, and
``DeltaTable.merge``s them with the writer properties it is given.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from benchmarks.common import CHUNK, rows


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
        the newest per key, MERGE them into a plain Delta table; seconds, and the keys merged."""
        from deltalake import DeltaTable

        started = time.perf_counter()
        log = pa.concat_tables(
            [  # offsets are per bucket
                read.filter(pc.greater_equal(read["__offset"], pa.scalar(before[b.bucket], pa.int64())))
                for b in self.client.log_info("cl").buckets
                for seg in self.client.log_segments("cl", b.bucket, before[b.bucket], b.log_end_offset)
                for read in [pq.read_table(seg.file, columns=["id", "name", "qty", "price", "__offset"])]
            ]
        )
        newest = log.group_by("id").aggregate([("__offset", "max")])
        latest = log.join(newest, keys=["id", "__offset"], right_keys=["id", "__offset_max"], join_type="inner").drop(
            ["__offset"]
        )
        (
            DeltaTable(self.target)
            .merge(
                latest,
                predicate="t.id = s.id",
                source_alias="s",
                target_alias="t",
                writer_properties=self.writer_properties,
            )
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        return time.perf_counter() - started, latest.num_rows
