"""Where the lake stands for one table: the positions a round is planned from (docs/DESIGN.md §4).

Failure mode this guards against: planning from a position that belongs to another
incarnation of the table. A position is only meaningful together with the ``table_id`` it
was reached for; a table dropped and re-created gets a new id, and the planner bootstraps it
instead of continuing the old id's offsets. The lake writer's commit metadata yields these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from tiering.kvstore.contract import BucketLog


class BucketPosition(NamedTuple):
    """A bucket's position after a round: ``log`` is the exclusive changelog end reached;
    ``snapshot`` is the snapshot id the bucket was bootstrapped from in that round, else None."""

    log: int
    snapshot: int | None


@dataclass(frozen=True)
class LakePosition:
    """The lake's state of one table: ``buckets`` maps bucket -> exclusive log offset reached.

    A bucket missing from ``buckets`` has never been tiered for this ``table_id``.
    """

    table_id: int
    buckets: Mapping[int, int] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if _not_int(self.table_id) or self.table_id < 0:
            raise ValueError(f"LakePosition.table_id must be a non-negative int, got {self.table_id!r}")
        for bucket, offset in self.buckets.items():
            if _not_int(bucket) or bucket < 0:
                raise ValueError(f"LakePosition(table_id={self.table_id}): bad bucket {bucket!r}")
            if _not_int(offset) or offset < 0:
                raise ValueError(f"LakePosition(table_id={self.table_id}): bucket {bucket} has bad offset {offset!r}")
        # A private copy: the caller's dict must not change a frozen value behind its back.
        object.__setattr__(self, "buckets", dict(self.buckets))

    def belongs_to(self, table_id: int) -> bool:
        """Whether these offsets were reached for ``table_id`` (not an earlier incarnation)."""
        return self.table_id == table_id

    def lag(self, logs: Iterable[BucketLog]) -> int:
        """Changelog records the store holds beyond this position, summed over ``logs``' buckets
        (a bucket never tiered lags by its whole log). An upper bound where a store's offsets have
        gaps (Fluss's ``-U`` records take offsets no reader sees)."""
        return sum(max(0, b.end - self.buckets.get(b.bucket, 0)) for b in logs)

    @classmethod
    def from_wire(cls, table_id: int, buckets: Mapping[str, int]) -> LakePosition:
        """Build from JSON-shaped data (bucket keys are strings, as in commit metadata and
        the store's lake report)."""
        parsed: dict[int, int] = {}
        for key, offset in buckets.items():
            try:
                parsed[int(key)] = offset
            except (TypeError, ValueError):
                raise ValueError(f"LakePosition(table_id={table_id}): bucket key {key!r} is not an int") from None
        return cls(table_id, parsed)


def _not_int(value: object) -> bool:
    return not isinstance(value, int) or isinstance(value, bool)
