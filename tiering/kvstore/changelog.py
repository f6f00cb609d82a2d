"""Reading a bucket's changelog as the store writes it (models.py: log segment files).

Shared by the reference store (its live state) and the lake writer (a changelog merge), so
both agree on which change of a key wins. Failure mode: a key applied twice or out of order.
Offsets are dense and unique within one bucket, so the change holding a key's highest
offset is its newest; across buckets offsets repeat, so callers pass one bucket at a time.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["DELETE", "newest_per_key"]

_OFFSET = "__offset"
#: The ``__op`` of a delete: the row carries only the key.
DELETE = "-D"


def newest_per_key(changes: pa.Table, keys: Sequence[str]) -> pa.Table:
    """One bucket's changes reduced to the newest per key (deletes included)."""
    if not changes.num_rows:
        return changes
    newest = changes.group_by(list(keys)).aggregate([(_OFFSET, "max")])
    if newest.num_rows == changes.num_rows:
        return changes
    return changes.filter(pc.is_in(changes[_OFFSET], value_set=newest[f"{_OFFSET}_max"]))
