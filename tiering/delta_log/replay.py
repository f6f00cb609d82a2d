"""Trimming a round's splits to what the lake does not have yet.

Failure mode this guards against: a round replayed after a crash, or by a new leader taking
over a checkpoint, re-applying changes the lake already holds. Re-applying a log range over
newer rows can resurrect a key deleted later (the lake keeps no tombstones), and re-applying
an old snapshot regresses a bucket. The lake is the truth (docs/DESIGN.md §4), so every split is cut
against the lake's position of its bucket right before it is written; what is left is
exactly what is missing, whichever driver planned the round and however often it replays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tiering.enumerator.positions import LakePosition
from tiering.enumerator.splits import LogSplit, SnapshotSplit, Split, sort_key


def missing_splits(splits: Sequence[Split], lake: LakePosition | None) -> list[Split]:
    """The parts of ``splits`` not yet in the lake at ``lake`` (None: nothing tiered), in
    stable split order.

    Raises ValueError when a log split starts above the lake's position: the changes between
    would be lost, so the table must be re-planned from the lake instead.
    """
    if lake is None:
        return sorted(splits, key=sort_key)
    needed: list[Split] = []
    for split in sorted(splits, key=sort_key):
        reached = lake.buckets.get(split.bucket) if split.table_id == lake.table_id else None
        if reached is None:
            needed.append(split)
        elif isinstance(split, SnapshotSplit):
            if reached < split.log_offset:
                needed.append(split)
        elif split.end_offset > reached:
            if split.start_offset > reached and not _bootstrapped_here(needed, split):
                raise ValueError(
                    f"table {split.table!r} bucket {split.bucket}: round starts at offset "
                    f"{split.start_offset} but the lake holds only up to {reached}"
                )
            needed.append(replace(split, start_offset=max(split.start_offset, reached)))
    return needed


def _bootstrapped_here(splits: Sequence[Split], log: LogSplit) -> bool:
    return any(isinstance(s, SnapshotSplit) and s.bucket == log.bucket and s.table_id == log.table_id for s in splits)
