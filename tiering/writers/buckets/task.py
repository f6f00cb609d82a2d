"""What a bucket task is given and what it returns: values that travel between the driver and an
executor, so each is frozen and picklable. A failure travels as a value too (a
:class:`BucketResult` with an error), so one bucket's failure fails its table only."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from deltalake.transaction import AddAction

from tiering.conf.defaults import DEFAULT_COMPRESSION, DEFAULT_TARGET_FILE_MB
from tiering.delta_log.layout import BUCKET_COLUMN, lake_schema
from tiering.kvstore.contract import StoreTable
from tiering.objectstore.object_store import ObjectStore
from tiering.writers.bucket_plan import BucketPlan

__all__ = ["MIB", "BucketTask", "WrittenFile", "BucketResult", "file_schema"]

MIB = 1024 * 1024


@dataclass(frozen=True)
class BucketTask:
    """Everything a task needs to rewrite one bucket (picklable: it travels to an executor)."""

    table: StoreTable
    table_uri: str
    plan: BucketPlan
    store: ObjectStore
    #: the size the files written aim at (the round's ``lake.target_file_mb``)
    target_file_bytes: int = DEFAULT_TARGET_FILE_MB * MIB
    #: their Parquet codec, as pyarrow names it (``lake.compression``)
    compression: str = DEFAULT_COMPRESSION


@dataclass(frozen=True)
class WrittenFile:
    """A data file a task wrote, relative to the table root, with its Delta statistics."""

    path: str
    bucket: int
    size: int
    num_records: int
    stats: str
    modification_time: int

    def add_action(self) -> AddAction:
        return AddAction(
            path=self.path,
            size=self.size,
            partition_values={BUCKET_COLUMN: str(self.bucket)},
            modification_time=self.modification_time,
            data_change=True,
            stats=self.stats,
        )


@dataclass(frozen=True)
class BucketResult:
    """What a task returns: its files and, for a rewrite by file, the lake files they replace
    (paths as the log names them); or why it failed (a message naming the table and bucket).
    A failure is a value, not a raised error, so one bucket's failure fails its table only."""

    table: str
    bucket: int
    files: tuple[WrittenFile, ...] = ()
    error: str | None = None
    replaced: tuple[str, ...] = ()


def file_schema(table: StoreTable) -> pa.Schema:
    """The columns of a lake data file: the lake's, without the ``__bucket`` partition column."""
    lake = lake_schema(table)
    return lake.remove(lake.get_field_index(BUCKET_COLUMN))
