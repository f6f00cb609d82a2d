"""The system columns and op codes a store's changes carry through the seam (docs/DESIGN.md §3).

Failure mode this guards against: two modules spelling them differently. A ``-D`` read as
anything else resurrects a deleted row; an ``__offset`` spelt otherwise makes the oldest change
of a key win. Every store behind the seam gives its changes these columns (the reference store
writes them into its own log and snapshot files, Fluss's reader maps its change kinds onto
them), the lake keeps ``__offset`` and ``__timestamp`` in its rows, and other tools read both:
they are written down once, here. (The lake's own ``__bucket`` is in
:mod:`tiering.delta_log.layout`; user column names may not start with ``__``, so none of these
can clash with a user column.)
"""

from __future__ import annotations

import pyarrow as pa

__all__ = [
    "OFFSET_COLUMN",
    "OP_COLUMN",
    "TIMESTAMP_COLUMN",
    "OFFSET_TYPE",
    "TIMESTAMP_TYPE",
    "INSERT",
    "UPDATE",
    "DELETE",
    "OPS",
]

#: Offset of the change that wrote the row (bigint): increasing and unique within a bucket's log,
#: not necessarily dense (Fluss's log holds ``-U`` records a reader drops).
OFFSET_COLUMN = "__offset"
#: The change's op code (string); only in changes, never in snapshots nor in the lake.
OP_COLUMN = "__op"
#: Store time of the change (timestamp, UTC, microseconds).
TIMESTAMP_COLUMN = "__timestamp"
OFFSET_TYPE = pa.int64()
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

#: An upsert of a key the bucket did not hold.
INSERT = "+I"
#: An upsert of a key the bucket held.
UPDATE = "+U"
#: A delete: the row may carry only the key, its other columns null.
DELETE = "-D"
OPS = (INSERT, UPDATE, DELETE)
