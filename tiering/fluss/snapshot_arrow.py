"""A bucket's KV snapshot read as Arrow: our JVM writer (``ArrowSnapshotWriter`` of
jvm/fluss-snapshot-source) writes its rows to an Arrow IPC file, which this process maps and hands
on batch by batch.

Failure modes it guards against:
- one py4j call per field and row: the JVM writes whole record batches, read here in place from
  the mapped file, never all at once;
- a file left behind: it is made in the process's temporary directory and removed as soon as it is
  mapped (the mapping stays readable while a batch refers to it), or when the write fails;
- a gone snapshot read as an empty bucket: ``SnapshotUnavailableError`` naming table, bucket and
  snapshot; a table re-created since planning: ``TableRecreatedError``; rows whose Arrow schema is
  not ``StoreTable.arrow_schema`` (the table altered since planning): ``SchemaMismatchError``
  naming both schemas;
- a JVM without the writer: ``FlussClientError`` before any call into it, naming the class and
  our jar (a Spark JVM whose ``spark.jars`` lack it: the copy to put there; a gateway JVM of our own
  started where no copy was found: the places looked in, and the wheel or the build that has one).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from tiering.errors import (
    FlussClientError,
    SchemaMismatchError,
    SnapshotUnavailableError,
    StoreError,
    StoreUnavailableError,
    TableNotFoundError,
    TableRecreatedError,
)
from tiering.fluss.jvm import FlussJvm, has_class, snapshot_source_hint
from tiering.kvstore.contract import SnapshotRef, StoreTable

__all__ = ["snapshot_batches"]

_WRITER = "kvtiering.fluss.snapshot.ArrowSnapshotWriter"
_RECREATED = _WRITER + "$TableRecreatedException"
_SNAPSHOT_GONE = "org.apache.fluss.exception.KvSnapshotNotExistException"
_TABLE_NOT_EXIST = "org.apache.fluss.exception.TableNotExistException"
_RETRIABLE = "org.apache.fluss.exception.RetriableException"


def snapshot_batches(java: FlussJvm, database: str, table: StoreTable, ref: SnapshotRef) -> Iterator[pa.RecordBatch]:
    """The rows of snapshot ``ref`` of ``table`` (of Fluss ``database``), as record batches of exactly
    ``table.arrow_schema``, read in ``java``'s JVM. The snapshot is read whole when the first batch
    is asked for; its batches are then mapped from the file, one at a time."""
    if not has_class(java.gateway, _WRITER):
        raise FlussClientError(f"the JVM reading Fluss snapshots has no {_WRITER}: {snapshot_source_hint(java.owned)}")
    fd, name = tempfile.mkstemp(prefix="fluss-snapshot-", suffix=".arrow")
    os.close(fd)
    try:
        future = java.jvm.kvtiering.fluss.snapshot.ArrowSnapshotWriter.write(
            java.connection, database, table.name, ref.table_id, ref.bucket, ref.snapshot_id, name
        )
        _, failure = java.outcome(future)
        if failure is not None:
            raise _error(java, failure, table, ref)
        mapped = pa.memory_map(name)
    finally:
        Path(name).unlink(missing_ok=True)
    with mapped:
        reader = pa.ipc.open_file(mapped)
        if not reader.schema.equals(table.arrow_schema):
            raise SchemaMismatchError(
                f"Fluss table {table.name!r} bucket {ref.bucket} snapshot {ref.snapshot_id}: its rows have "
                f"columns {reader.schema.to_string(show_schema_metadata=False)!r}, the table was planned with "
                f"{table.arrow_schema.to_string(show_schema_metadata=False)!r}",
                table=table.name,
            )
        for index in range(reader.num_record_batches):
            yield reader.get_batch(index)


def _error(java: FlussJvm, failure: Any, table: StoreTable, ref: SnapshotRef) -> StoreError | TableRecreatedError:
    """The writer's failure as the seam's error."""
    kinds, text = java.failure_kinds(failure)
    where = f"Fluss table {table.name!r} bucket {ref.bucket} snapshot {ref.snapshot_id}"
    if _SNAPSHOT_GONE in kinds:
        return SnapshotUnavailableError(
            f"{where}: the snapshot is gone (not taken yet, or deleted since: only a lease keeps it)",
            table=table.name,
        )
    if _RECREATED in kinds:
        return TableRecreatedError(f"{where}: {text}", table=table.name)
    if _TABLE_NOT_EXIST in kinds:
        return TableNotFoundError(f"{where}: {text}", code="TABLE_NOT_FOUND", table=table.name)
    kind = StoreUnavailableError if _RETRIABLE in kinds else StoreError
    return kind(f"{where}: Fluss at {java.bootstrap_servers}: {text}", table=table.name)
