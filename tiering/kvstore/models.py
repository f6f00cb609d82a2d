"""The KV store protocol's data model (docs/DESIGN.md §3), shared by the reference server and the client.

Field names are the wire names: other tools speak this protocol too, so renaming a field here
is a protocol change. Offsets are changelog positions; every ``*_end_offset`` and a
snapshot's ``log_offset`` are exclusive ends.

File layout the store writes (the lake writer reads these with Spark):
- snapshot files: Parquet, the table's user columns plus ``__offset`` (bigint: offset of the
  change that last wrote the row) and ``__timestamp`` (timestamp, UTC, of that change);
- log segment files: Parquet, the user columns plus ``__offset``, ``__op`` (``+I``, ``+U``,
  ``-D``; a delete carries the primary key, other columns null) and ``__timestamp``.
The system columns' names and the op codes are tiering.kvstore.protocol's.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from tiering.kvstore.names import MAX_NAME_BYTES, check_column_name, check_table_name, duplicate_names
from tiering.kvstore.types import normalize_type

#: Every integer of the protocol is stored as a SQLite INTEGER / Arrow int64: larger values
#: are refused as bad input instead of overflowing deep inside the store.
INT64_MAX = 2**63 - 1
#: Ids, offsets, epochs and versions: 0 .. 2^63-1.
Count = Annotated[int, Field(ge=0, le=INT64_MAX)]
#: A lease's expiry (now + duration) must stay an int64.
LeaseDuration = Annotated[int, Field(gt=0, le=2**62)]
#: Names are checked by tiering.kvstore.names (whose messages say what is wrong); the JSON
#: schemas below are what JSON Schema can say of that rule (it cannot count UTF-8 bytes).
TableName = Annotated[
    str,
    AfterValidator(check_table_name),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_NAME_BYTES,
            "pattern": r"^[^/\\\x00-\x1f\x7f]+$",
            "not": {"enum": [".", ".."]},
            "description": "one path segment: no '/' or '\\', no control characters or surrounding whitespace, "
            "not '.' or '..', at most 255 bytes in UTF-8",
        }
    ),
]
ColumnName = Annotated[
    str,
    AfterValidator(check_column_name),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_NAME_BYTES,
            "pattern": r"^[^\x00-\x1f\x7f]+$",
            "not": {"pattern": "^__"},
            "description": "no control characters, not starting with '__' (system columns), at most 255 bytes in UTF-8",
        }
    ),
]
#: A tiering job's name (its ``[job] name``): what a lake report says made it.
JobName = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[A-Za-z0-9._-]+$")]
#: A bucket number as a JSON object key.
BucketKey = Annotated[str, Field(pattern=r"^[0-9]{1,10}$")]


class _Model(BaseModel):
    """A request body the store validates, or a part of one: a field it does not know is refused
    (400 naming it), so a misspelt field never passes for an accepted one."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)


class _Answer(_Model):
    """An answer of the store, as a client reads it: a field it does not know is ignored, so a
    newer store can add one without breaking the jobs of an earlier release (a rolling upgrade:
    docs/DESIGN.md §3). The store never reads one of these from a request."""

    model_config = ConfigDict(extra="ignore")


def _known_fields(model: type[BaseModel]) -> BeforeValidator:
    """Drops the keys ``model`` does not know from a JSON object before ``model`` reads it."""
    known = frozenset(model.model_fields) | {f.alias for f in model.model_fields.values() if f.alias}

    def drop_unknown(value: object) -> object:
        if isinstance(value, dict) and not known.issuperset(value):
            return {k: v for k, v in value.items() if k in known}
        return value

    return BeforeValidator(drop_unknown)


class Column(_Model):
    name: ColumnName
    type: str = Field(
        description="A Spark SQL type name: boolean, tinyint, smallint, int, bigint, float, double, string, "
        "binary, date, timestamp, decimal(p,s); each one's JSON encoding and Delta type are in the manual's "
        "[column types](types.md)",
        examples=["bigint", "string", "decimal(10,2)", "timestamp"],
    )

    @field_validator("type")
    @classmethod
    def _known_type(cls, v: str) -> str:
        return normalize_type(v)


class AddColumnRequest(Column):
    """Schema evolution: a column appended to a table. Only nullable columns can be added
    (rows written before have no value for it), so ``nullable`` may only say so."""

    nullable: bool = True

    @field_validator("nullable")
    @classmethod
    def _only_nullable(cls, v: bool) -> bool:
        if not v:
            raise ValueError("only nullable columns can be added: rows written before the add read as null")
        return v


class TableSpec(_Model):
    """What a client sends to create a table."""

    name: TableName
    columns: list[Column] = Field(alias="schema", min_length=1)
    primary_key: list[str] = Field(min_length=1)
    num_buckets: int = Field(ge=1, le=4096)

    @model_validator(mode="after")
    def _key_in_schema(self) -> TableSpec:
        names = [c.name for c in self.columns]
        duplicates = duplicate_names(names)
        if duplicates:
            raise ValueError(
                f"schema has duplicate column names (Spark compares them case-insensitively): {duplicates}"
            )
        missing = [k for k in self.primary_key if k not in names]
        if missing:
            raise ValueError(f"primary_key columns {missing} are not in schema {names}")
        if len(set(self.primary_key)) != len(self.primary_key):
            raise ValueError(f"primary_key names a column twice: {self.primary_key}")
        return self


class TableInfo(TableSpec):
    """A table as the store describes it; ``table_id`` changes when a table is re-created. An
    answer, read as answers are (its columns too), where the spec a client sends is a request."""

    model_config = ConfigDict(extra="ignore")

    columns: list[Annotated[Column, _known_fields(Column)]] = Field(alias="schema", min_length=1)
    table_id: int


class Snapshot(_Answer):
    bucket: int
    snapshot_id: int
    log_offset: int  # exclusive: the snapshot holds every change below this offset
    files: list[str]
    row_count: int
    size_bytes: int


class TableSnapshots(_Answer):
    table_id: int
    buckets: list[Snapshot]


class BucketLog(_Answer):
    bucket: int
    log_start_offset: int  # first offset still readable (older segments were deleted)
    log_end_offset: int  # exclusive end of the last flushed segment


class TableLog(_Answer):
    table_id: int
    buckets: list[BucketLog]


class LogSegment(_Answer):
    start_offset: int
    end_offset: int  # exclusive
    file: str


class LogSegments(_Answer):
    segments: list[LogSegment]


class LogRange(_Model):
    """Offsets ``[from, to)`` of one bucket's log (``from``/``to`` as in the per-bucket GET)."""

    bucket: Count
    from_offset: Count = Field(alias="from")
    to_offset: Count = Field(alias="to")


class SegmentsRequest(_Model):
    """The log segments of several buckets of one table in one call (a round reads them all)."""

    ranges: list[LogRange] = Field(min_length=1, max_length=4096)


class BucketSegments(_Answer):
    bucket: int
    segments: list[LogSegment]


class TableSegments(_Answer):
    buckets: list[BucketSegments]


class RowsRequest(_Model):
    op: str = Field(pattern=r"^(upsert|delete)$")
    rows: list[dict]


class SnapshotRef(_Model):
    table_id: Count
    bucket: Count
    snapshot_id: Count


class BucketRef(_Model):
    table_id: Count
    bucket: Count


class TableEpoch(_Model):
    """A table's ownership epoch in a tiering group (ZooKeeper's, bumped at every hand-over)."""

    table_id: Count
    table_epoch: Count


class TableOwners(_Model):
    """A group member's claim on the tables of an acquire: the store refuses the acquire with 409
    ``TABLE_EPOCH_FENCED`` when it has seen a higher table epoch for one of them (the table moved to
    another member), and remembers the highest seen."""

    group: JobName
    job: JobName
    tables: list[TableEpoch] = Field(min_length=1)


class AcquireRequest(_Model):
    duration_ms: LeaseDuration
    epoch: Count
    snapshots: list[SnapshotRef]
    owners: TableOwners | None = None


class RenewRequest(_Model):
    duration_ms: LeaseDuration
    epoch: Count


class ReleaseRequest(_Model):
    epoch: Count
    buckets: list[BucketRef]


#: A snapshot reference as a lease's answer carries it: the request's own model (the client compares
#: the two), read as answers are.
_AnsweredSnapshotRef = Annotated[SnapshotRef, _known_fields(SnapshotRef)]


class Lease(_Answer):
    lease_id: str
    epoch: int
    expires_at_ms: int
    snapshots: list[_AnsweredSnapshotRef]


class AcquireResult(Lease):
    unavailable: list[_AnsweredSnapshotRef] = []


class LeaseList(_Answer):
    leases: list[Lease]


class LakeReport(_Model):
    """What a job's lake holds of a table. ``job``: the job that made the report (its name); the
    store keeps one report per table and refuses another job's with 409 ``OTHER_JOB``. Optional
    so an older client's report still works: a report without it is taken as the holder's.
    ``group`` and ``table_epoch``: a tiering group member's report; one table is then tiered by one
    group, any member of it, and a report under a lower table epoch than the store has seen for the
    table is refused with 409 ``TABLE_EPOCH_FENCED`` (the table moved to another member)."""

    table_id: Count
    epoch: Count
    lake_version: Count
    buckets: dict[BucketKey, Count] = Field(json_schema_extra={"additionalProperties": False})
    job: JobName | None = None
    group: JobName | None = None
    table_epoch: Count | None = None

    @model_validator(mode="after")
    def _owned_in_a_group(self) -> LakeReport:
        """A group member's report names its job, its group and the table's epoch, all three: the
        table epoch orders the group's members, and means nothing outside the group."""
        if (self.group is None) != (self.table_epoch is None) or (self.group is not None and self.job is None):
            raise ValueError("group and table_epoch come together, with job")
        return self


#: A lake report as the store answers it (``GET``, ``PUT`` and ``DELETE /v1/tables/{t}/lake``): the
#: request's model, read as answers are.
LAKE_REPORT_ANSWER: TypeAdapter[LakeReport] = TypeAdapter(Annotated[LakeReport, _known_fields(LakeReport)])


class TableList(_Answer):
    tables: list[TableInfo]


class ErrorBody(_Answer):
    error: str
    message: str


class WriteResult(_Answer):
    """What one write appended: per touched bucket the ``[start, end)`` offsets of its segment.
    ``records`` can be below ``rows``: deleting an absent key writes nothing."""

    table_id: int
    rows: int
    records: int
    buckets: dict[str, Annotated[list[int], Field(min_length=2, max_length=2)]]


class TableDropped(_Answer):
    dropped: str
    table_id: int


class LeaseDropped(_Answer):
    dropped: str


class Health(_Answer):
    status: str


# Batched calls: a round over thousands of tables makes one call for all of them instead of one
# per table. Each answers for a table what the single-table call answers, and a table's refusal
# (dropped meanwhile, log truncated) is that table's entry, never the whole call's failure.

#: Tables in one batched call: a job's whole selection.
MAX_BATCH_TABLES = 10_000


class NamedTableLog(TableLog):
    """``GET /v1/tables/{name}/log``'s answer, named: one entry of :class:`TablesLog`. ``lake``:
    the offsets of the table's last lake report (this ``table_id``'s; None before the first), so
    a planner starting cold can tell an idle table from one to read without opening its lake;
    ``lake_job``: the job that made that report, only when the client asked (``?holders=true``:
    a client of an earlier release would refuse the field) and absent when the report named none;
    ``lake_group``: that job's tiering group, likewise."""

    name: str
    lake: dict[BucketKey, Count] | None = None
    lake_job: str | None = Field(None, description="only with ?holders=true, and absent when the report names no job")
    lake_group: str | None = Field(
        None, description="only with ?holders=true, and absent when the report names no tiering group"
    )


class TablesLog(_Answer):
    """The log ends of many tables, by name; ``missing``: the names asked for that the catalog
    does not hold (dropped, or never created)."""

    tables: list[NamedTableLog]
    missing: list[str] = []


class LogsRequest(_Model):
    tables: list[TableName] = Field(min_length=1, max_length=MAX_BATCH_TABLES)


class TableRanges(SegmentsRequest):
    """One table's part of :class:`TablesSegmentsRequest`: its ``ranges`` as for the single-table call."""

    table: TableName


class TablesSegmentsRequest(_Model):
    tables: list[TableRanges] = Field(min_length=1, max_length=MAX_BATCH_TABLES)


class NamedTableSegments(TableSegments):
    table: str


class TableFailure(_Answer):
    """A table's refusal inside a batched answer: the envelope its single-table call answers with."""

    table: str
    error: ErrorBody


class TablesSegments(_Answer):
    """Per table asked, in the order asked: its segments, or its refusal."""

    tables: list[NamedTableSegments | TableFailure]


class TableLakeReport(_Model):
    table: TableName
    report: LakeReport


class LakeReportsRequest(_Model):
    reports: list[TableLakeReport] = Field(min_length=1, max_length=MAX_BATCH_TABLES)


class LakeReportResult(_Answer):
    """``error`` null: the report was stored."""

    table: str
    error: ErrorBody | None


class LakeReportResults(_Answer):
    """Per report, in the order sent."""

    results: list[LakeReportResult]
