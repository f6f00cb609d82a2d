"""How stale the lake is, in seconds: the age of the oldest store write the lake does not hold.

Failure mode this addresses: lag in records says nothing about time. Ten thousand records
behind can be half a second on a busy table or a day on a quiet one, and a monitor that
alerts on records pages people at the wrong times. The store time of a write is its
``__timestamp``; the oldest write the lake lacks is the first change past the lake's offset in
each bucket that lags, so one batch of changes per lagging bucket is read (through the store
seam's reader), and a table the lake has caught up with costs nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from tiering.enumerator.positions import LakePosition
from tiering.kvstore.contract import TIMESTAMP_COLUMN, BucketLog, PlanningStore

__all__ = ["oldest_untiered_write_ms", "freshness_s"]


def oldest_untiered_write_ms(
    store: PlanningStore, table: str, position: LakePosition | None, logs: Iterable[BucketLog]
) -> int | None:
    """The store time (epoch ms) of the oldest change past ``position``; None when the lake holds
    every change the store's log ends show. A never-tiered bucket lags from its log start."""
    reached = position.buckets if position is not None else {}
    ranges = [(b.bucket, start, b.end) for b in logs if (start := max(reached.get(b.bucket, 0), b.start)) < b.end]
    if not ranges:
        return None
    described = store.table(table)
    reader = store.bucket_reader()
    oldest: int | None = None
    for bucket, start, end in ranges:
        first = next((batch for batch in reader.changelog(described, bucket, start, end) if batch.num_rows), None)
        if first is None:
            continue
        first_us = pc.min(first.column(TIMESTAMP_COLUMN).cast(pa.int64())).as_py()  # UTC microseconds
        if first_us is not None:
            oldest = first_us // 1000 if oldest is None else min(oldest, first_us // 1000)
    return oldest


def freshness_s(oldest_untiered_ms: int | None, now_ms: int) -> float:
    """Seconds the lake is behind: 0 when it holds every flushed write."""
    return 0.0 if oldest_untiered_ms is None else max(0.0, (now_ms - oldest_untiered_ms) / 1000.0)
