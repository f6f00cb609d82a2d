"""Where a table lives in the lake and how its commits are named (docs/DESIGN.md §6).

Failure mode this guards against: two terms (or two rounds) of a job writing the same table
under transaction versions that do not order them. Delta keeps one version per app id and
we skip a round whose version is already reached, so the version must only grow: across
rounds of a term and across terms. ``txn_version`` packs ``(epoch, round)`` so a newer epoch
outranks any round of an older one. A writer (JVM or Rust) and the position reader must agree
on every name here, hence one module without Spark.
"""

from __future__ import annotations

import pyarrow as pa

from tiering.kvstore.contract import OFFSET_COLUMN, OFFSET_TYPE, TIMESTAMP_COLUMN, TIMESTAMP_TYPE, StoreTable

__all__ = [
    "BUCKET_COLUMN",
    "SYSTEM_COLUMNS",
    "METADATA_KEY",
    "METADATA_VERSION",
    "MAINTENANCE_KEY",
    "fence_property",
    "DELETION_VECTORS_FEATURE",
    "DELETION_VECTORS_PROPERTY",
    "ROUND_BITS",
    "lake_directory",
    "app_id",
    "txn_version",
    "epoch_round",
    "lake_schema",
]

BUCKET_COLUMN = "__bucket"
#: The lake's system columns: its own ``__bucket``, and the store's (tiering.kvstore.contract.columns)
#: that every row keeps (``__op`` never reaches the lake).
SYSTEM_COLUMNS = (BUCKET_COLUMN, OFFSET_COLUMN, TIMESTAMP_COLUMN)

#: Top-level key of the commit info entry our writers add to every round commit.
METADATA_KEY = "kvTiering"
METADATA_VERSION = 1
#: Top-level key of the commit info entry of a maintenance commit (compaction, vacuum, table
#: properties): who made it, at which epoch. Never a round's entry: it carries no offsets.
MAINTENANCE_KEY = "kvTieringMaintenance"
#: Prefix of the table properties that fence a writer's older epochs: ``kvTiering.fenceEpoch.<writer>``
#: (:func:`fence_property`). Setting one is a metadata change, which every concurrent Delta commit
#: conflicts with: a stale writer's round prepared before it cannot land on top of a compaction
#: (``tiering.writers.maintenance``) or of a group member's first round (``tiering.writers.table_fence``).
_FENCE_PROPERTY_PREFIX = "kvTiering.fenceEpoch."
#: Delta's table property of its checkpoint interval (set by maintenance, read by the round
#: commits' hooks), and delta-rs's default for a table without it.
CHECKPOINT_INTERVAL_PROPERTY = "delta.checkpointInterval"
DELTA_RS_CHECKPOINT_INTERVAL = 100
#: Delta's table property that lets writers mark deleted rows in a bitmap beside a file instead of
#: rewriting it, and the reader feature a table with such vectors declares in its protocol.
DELETION_VECTORS_PROPERTY = "delta.enableDeletionVectors"
DELETION_VECTORS_FEATURE = "deletionVectors"

ROUND_BITS = 32
_MAX_ROUND = 2**ROUND_BITS - 1
_MAX_VERSION = 2**63 - 1  # Delta stores txn versions as a signed long


#: Characters delta-rs and object-store URLs do not take literally in a path segment: ``%``
#: is percent-decoded (``%2e%2e`` would open the lake root's parent), ``[`` and ``]`` make the
#: URL parser read a host, ``?`` and ``#`` end an ``s3://`` path; ``~`` is the escape itself.
_UNSAFE_IN_URLS = frozenset("%?#[]~")


def lake_directory(table: str) -> str:
    """The directory of ``table`` under the lake root: its name, with each character in
    ``%?#[]~`` written as ``~XX`` (its UTF-8 bytes in hex). One segment per table and no two
    tables in one (``~`` only ever starts an escape); every name the store accepts but these
    is its own directory, as a reader of the lake expects (``50%`` lives in ``50~25``)."""
    return "".join("".join(f"~{b:02X}" for b in c.encode()) if c in _UNSAFE_IN_URLS else c for c in table)


def app_id(job: str, table: str) -> str:
    """The Delta app id of one job's writes to one table: ``tiering/<job>/<table>``."""
    if not job:
        raise ValueError("job name must not be empty: it scopes the Delta app id")
    return f"tiering/{job}/{table}"


def fence_property(writer: str) -> str:
    """The table property holding the epoch below which ``writer``'s commits are refused. One per
    writer, in the writer's own epochs (a job's term epoch, a group's table epoch), as its txn
    versions are: the epochs of two writers are not comparable, so one never fences the other."""
    if not writer:
        raise ValueError("writer must not be empty: it scopes the fence")
    return _FENCE_PROPERTY_PREFIX + writer


def txn_version(epoch: int, round_id: int) -> int:
    """``epoch * 2**32 + round``: grows with the round within a term and with every new term."""
    if epoch < 0:
        raise ValueError(f"epoch must be >= 0, got {epoch}")
    if not 0 <= round_id <= _MAX_ROUND:
        raise ValueError(f"round must be in [0, 2**{ROUND_BITS}), got {round_id}")
    version = (epoch << ROUND_BITS) | round_id
    if version > _MAX_VERSION:
        raise ValueError(f"epoch {epoch} is too large for a Delta transaction version")
    return version


def epoch_round(version: int) -> tuple[int, int]:
    """The inverse of :func:`txn_version`."""
    if version < 0:
        raise ValueError(f"transaction version must be >= 0, got {version}")
    return version >> ROUND_BITS, version & _MAX_ROUND


def lake_schema(table: StoreTable) -> pa.Schema:
    """User columns (store types), then ``__bucket`` (partition), ``__offset``, ``__timestamp``.

    Every field is nullable: Spark writes nullable Parquet columns, and a non-null Delta
    column would make Delta readers check what the store already guarantees.
    """
    fields = [pa.field(c.name, c.arrow_type) for c in table.columns]
    fields += [
        pa.field(BUCKET_COLUMN, pa.int32()),
        pa.field(OFFSET_COLUMN, OFFSET_TYPE),
        pa.field(TIMESTAMP_COLUMN, TIMESTAMP_TYPE),
    ]
    return pa.schema(fields)
