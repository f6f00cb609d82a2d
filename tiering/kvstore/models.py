"""The KV store protocol's data model (DESIGN §3), shared by the reference server and the client.

Field names are the wire names: other tools speak this protocol too, so renaming a field here
is a protocol change. Offsets are changelog positions; every ``*_end_offset`` and a
snapshot's ``log_offset`` are exclusive ends.

File layout the store writes (the lake writer reads these with Spark):
- snapshot files: Parquet, the table's user columns plus ``__offset`` (bigint: offset of the
  change that last wrote the row) and ``__timestamp`` (timestamp, UTC, of that change);
- log segment files: Parquet, the user columns plus ``__offset``, ``__op`` (``+I``, ``+U``,
  ``-D``; a delete carries the primary key, other columns null) and ``__timestamp``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tiering.kvstore.types import normalize_type

SYSTEM_COLUMNS = ("__offset", "__op", "__timestamp")
OPS = ("+I", "+U", "-D")


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)


class Column(_Model):
    name: str = Field(min_length=1)
    type: str

    @field_validator("type")
    @classmethod
    def _known_type(cls, v: str) -> str:
        return normalize_type(v)

    @field_validator("name")
    @classmethod
    def _not_system(cls, v: str) -> str:
        if v.startswith("__"):
            raise ValueError(f"column name {v!r} is reserved: names starting with '__' are system columns")
        return v


class TableSpec(_Model):
    """What a client sends to create a table."""

    name: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z_][A-Za-z0-9_\-]*$")
    columns: list[Column] = Field(alias="schema", min_length=1)
    primary_key: list[str] = Field(min_length=1)
    num_buckets: int = Field(ge=1, le=4096)

    @model_validator(mode="after")
    def _key_in_schema(self) -> "TableSpec":
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise ValueError(f"schema has duplicate column names: {names}")
        missing = [k for k in self.primary_key if k not in names]
        if missing:
            raise ValueError(f"primary_key columns {missing} are not in schema {names}")
        return self


class TableInfo(TableSpec):
    """A table as the store describes it; ``table_id`` changes when a table is re-created."""

    table_id: int


class Snapshot(_Model):
    bucket: int
    snapshot_id: int
    log_offset: int  # exclusive: the snapshot holds every change below this offset
    files: list[str]
    row_count: int
    size_bytes: int


class TableSnapshots(_Model):
    table_id: int
    buckets: list[Snapshot]


class BucketLog(_Model):
    bucket: int
    log_start_offset: int  # first offset still readable (older segments were deleted)
    log_end_offset: int  # exclusive end of the last flushed segment


class TableLog(_Model):
    table_id: int
    buckets: list[BucketLog]


class LogSegment(_Model):
    start_offset: int
    end_offset: int  # exclusive
    file: str


class LogSegments(_Model):
    segments: list[LogSegment]


class RowsRequest(_Model):
    op: str = Field(pattern=r"^(upsert|delete)$")
    rows: list[dict]


class SnapshotRef(_Model):
    table_id: int
    bucket: int
    snapshot_id: int


class BucketRef(_Model):
    table_id: int
    bucket: int


class AcquireRequest(_Model):
    duration_ms: int = Field(gt=0)
    epoch: int = Field(ge=0)
    snapshots: list[SnapshotRef]


class RenewRequest(_Model):
    duration_ms: int = Field(gt=0)
    epoch: int = Field(ge=0)


class ReleaseRequest(_Model):
    epoch: int = Field(ge=0)
    buckets: list[BucketRef]


class Lease(_Model):
    lease_id: str
    epoch: int
    expires_at_ms: int
    snapshots: list[SnapshotRef]


class AcquireResult(Lease):
    unavailable: list[SnapshotRef] = []


class LeaseList(_Model):
    leases: list[Lease]


class LakeReport(_Model):
    table_id: int
    epoch: int = Field(ge=0)
    lake_version: int = Field(ge=0)
    buckets: dict[str, int]


class TableList(_Model):
    tables: list[TableInfo]


class ErrorBody(_Model):
    error: str
    message: str
