"""The units of work the enumerator hands out: snapshot splits and log splits.

Splits are values: frozen, hashable, checked on construction, ordered by
``(table, bucket, kind)`` so a round's plan is deterministic. They name *what* to read, not
the files: files are resolved from the store when the split is read (snapshots are held by
the job lease; log segments are not deleted before they are tiered), so a split fits in the
checkpointed offset. Offsets follow the protocol: starts inclusive, ends exclusive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tiering.kvstore.contract import SnapshotRef


@dataclass(frozen=True, order=True)
class SnapshotSplit:
    """Bootstrap one bucket from a snapshot: replace the bucket's rows with the snapshot's.

    ``log_offset`` is the snapshot's exclusive changelog end; the bucket's log split of the
    same round starts there.
    """

    table: str
    bucket: int
    table_id: int
    snapshot_id: int
    log_offset: int

    kind = "snapshot"

    def __post_init__(self) -> None:
        if self.bucket < 0 or self.snapshot_id < 0 or self.log_offset < 0:
            raise ValueError(f"negative field in {self}")

    @property
    def ref(self) -> SnapshotRef:
        """The snapshot as the job lease holds it (the seam imported here: every Python process
        Spark starts for the source loads this module, and only planning needs pyarrow's types)."""
        from tiering.kvstore.contract import SnapshotRef

        return SnapshotRef(self.table_id, self.bucket, self.snapshot_id, self.log_offset)


@dataclass(frozen=True, order=True)
class LogSplit:
    """Apply changelog offsets ``[start_offset, end_offset)`` of one bucket (merge by key)."""

    table: str
    bucket: int
    table_id: int
    start_offset: int
    end_offset: int

    kind = "log"

    def __post_init__(self) -> None:
        if not 0 <= self.start_offset < self.end_offset:
            raise ValueError(f"empty or inverted log range [{self.start_offset}, {self.end_offset}) in {self}")


Split = SnapshotSplit | LogSplit


def sort_key(split: Split) -> tuple:
    """Stable order of a round's splits: by table, bucket, snapshot before log."""
    return (split.table, split.bucket, 0 if split.kind == "snapshot" else 1)
