"""How stale the lake is, in seconds: the age of the oldest store write the lake does not hold.

Failure mode this addresses: lag in records says nothing about time. Ten thousand records
behind can be half a second on a busy table or a day on a quiet one, and a monitor that
alerts on records pages people at the wrong times. The store time of a write is its
``__timestamp``; the oldest write the lake lacks is the first record past the lake's offset in
each bucket that lags, so one log segment per lagging bucket is read (two columns of it), and a
table the lake has caught up with costs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tiering.enumerator.positions import LakePosition
from tiering.kvstore.client import KvStoreClient
from tiering.kvstore.models import BucketLog, LogRange
from tiering.kvstore.protocol import OFFSET_COLUMN, TIMESTAMP_COLUMN
from tiering.objectstore.object_store import ObjectStore

__all__ = ["oldest_untiered_write_ms", "freshness_s"]

_COLUMNS = [OFFSET_COLUMN, TIMESTAMP_COLUMN]


def oldest_untiered_write_ms(
    client: KvStoreClient, store: ObjectStore, table: str, position: LakePosition | None, logs: Sequence[BucketLog]
) -> int | None:
    """The store time (epoch ms) of the oldest flushed write past ``position``; None when the
    lake holds every flushed write. A never-tiered bucket lags from its log start."""
    reached = position.buckets if position is not None else {}
    ranges = [
        LogRange(bucket=b.bucket, from_offset=start, to_offset=start + 1)
        for b in logs
        if (start := max(reached.get(b.bucket, 0), b.log_start_offset)) < b.log_end_offset
    ]
    if not ranges:
        return None
    oldest: int | None = None
    for r, segments in zip(ranges, client.table_segments(table, ranges), strict=False):
        fs, paths = store.locate([s.file for s in segments[:1]])
        for path in paths:
            with fs.open_input_file(path) as handle:
                rows = pq.read_table(handle, columns=_COLUMNS)
            after = rows.filter(pc.greater_equal(rows[OFFSET_COLUMN], pa.scalar(r.from_offset, pa.int64())))
            first_us = pc.min(after[TIMESTAMP_COLUMN].cast(pa.int64())).as_py()  # UTC microseconds
            if first_us is not None:
                oldest = first_us // 1000 if oldest is None else min(oldest, first_us // 1000)
    return oldest


def freshness_s(oldest_untiered_ms: int | None, now_ms: int) -> float:
    """Seconds the lake is behind: 0 when it holds every flushed write."""
    return 0.0 if oldest_untiered_ms is None else max(0.0, (now_ms - oldest_untiered_ms) / 1000.0)
