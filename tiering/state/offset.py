"""The Spark source's checkpointed offset, versioned (docs/DESIGN.md §4).

Failure modes: Spark compares offsets as JSON strings, so two encodings of the same state
that differ in key order or whitespace look like new data and replay a batch; and a
checkpoint written by an older version must keep decoding after an upgrade. Hence one
canonical encoding (fixed key order, no whitespace, buckets in numeric order, tables by
name) and a decoder that accepts every version it has ever written.

Versions:
- v1: ``{"v": 1, "lease_id": ..., "epoch": ..., "round": ..., "tables": {...}, "splits": [...]}``;
- v0: ``{"epoch": ..., "round": ..., "tables": {...}}`` (no lease id, no splits). It decodes
  with ``lease_id=None``; set one (``dataclasses.replace``) before encoding it as v1.

``tables`` are the positions after the round of the round's tables (v1 offsets written before
issue 21 carry every table tiered so far: they decode the same): ``log`` is the
exclusive changelog end, ``snapshot`` the snapshot id the bucket was bootstrapped from in that
round or null. ``splits`` is the round's plan, so ``partitions(start, end)`` needs only
``end``. A split is a compact list: ``[table, bucket, "snapshot", table_id, snapshot_id,
log_offset]`` or ``[table, bucket, "log", table_id, start_offset, end_offset]`` (start
inclusive, end exclusive).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from tiering.enumerator.positions import BucketPosition
from tiering.enumerator.splits import LogSplit, SnapshotSplit, Split, sort_key

__all__ = ["CURRENT_VERSION", "TableOffset", "TieringOffset"]

CURRENT_VERSION = 1


@dataclass(frozen=True)
class TableOffset:
    """One table's positions after a round, for the table id they were reached with."""

    table_id: int
    buckets: Mapping[int, BucketPosition] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class TieringOffset:
    """The state Spark checkpoints after each planned round."""

    lease_id: str | None
    epoch: int
    round: int
    tables: Mapping[str, TableOffset] = field(default_factory=dict, hash=False)
    splits: tuple[Split, ...] = ()
    version: int = CURRENT_VERSION

    @classmethod
    def initial(cls, lease_id: str, epoch: int) -> TieringOffset:
        """Round 0: nothing tiered yet, nothing planned."""
        return cls(lease_id=lease_id, epoch=epoch, round=0)

    def next_round(
        self, round_id: int, splits: tuple[Split, ...], tables: Mapping[str, TableOffset], *, lease_id: str, epoch: int
    ) -> TieringOffset:
        """The offset that checkpoints a planned round: its splits and its ``tables``' positions
        after it. Only the round's tables: Spark writes the offset every round, so one that
        carried every table the job ever tiered would grow with the job (10,000 idle tables:
        about 1 MB written per round), and nothing reads a position back from it (rounds are
        planned from the lake)."""
        return TieringOffset(lease_id=lease_id, epoch=epoch, round=round_id, tables=dict(tables), splits=splits)

    def to_dict(self) -> dict:
        if self.lease_id is None:
            raise ValueError("offset field 'lease_id' is required to encode an offset (a v0 offset has none)")
        tables = {}
        for name in sorted(self.tables):
            t = self.tables[name]
            buckets = {
                str(b): {"log": t.buckets[b].log, "snapshot": t.buckets[b].snapshot} for b in sorted(t.buckets)
            }
            tables[name] = {"table_id": t.table_id, "buckets": buckets}
        return {
            "v": CURRENT_VERSION,
            "lease_id": self.lease_id,
            "epoch": self.epoch,
            "round": self.round,
            "tables": tables,
            "splits": [_encode_split(s) for s in sorted(self.splits, key=sort_key)],
        }

    def to_json(self) -> str:
        """The canonical encoding: byte-identical for equal offsets."""
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=True, allow_nan=False)

    @classmethod
    def from_json(cls, text: str) -> TieringOffset:
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as e:
            raise ValueError(f"offset is not valid JSON: {e}: {str(text)[:200]!r}") from None
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: object) -> TieringOffset:
        if not isinstance(data, dict):
            raise ValueError(f"offset must be a JSON object, got {type(data).__name__}")
        version = _int(data.get("v", 0), "v")
        if version > CURRENT_VERSION:
            raise ValueError(f"offset field 'v': version {version} is newer than this code reads ({CURRENT_VERSION})")
        known = {"epoch", "round", "tables"} | ({"v", "lease_id", "splits"} if version >= 1 else set())
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"offset v{version} has unknown fields {unknown}")
        lease_id = None
        splits: tuple[Split, ...] = ()
        if version >= 1:
            lease_id = _required(data, "lease_id")
            if not isinstance(lease_id, str) or not lease_id:
                raise ValueError(f"offset field 'lease_id' must be a non-empty string, got {lease_id!r}")
            raw_splits = _required(data, "splits")
            if not isinstance(raw_splits, list):
                raise ValueError(f"offset field 'splits' must be a list, got {type(raw_splits).__name__}")
            splits = tuple(_decode_split(s, f"splits[{i}]") for i, s in enumerate(raw_splits))
        return cls(
            lease_id=lease_id,
            epoch=_int(_required(data, "epoch"), "epoch"),
            round=_int(_required(data, "round"), "round"),
            tables=_decode_tables(_required(data, "tables")),
            splits=splits,
            version=version,
        )


def _encode_split(split: Split) -> list:
    if isinstance(split, SnapshotSplit):
        return [split.table, split.bucket, "snapshot", split.table_id, split.snapshot_id, split.log_offset]
    return [split.table, split.bucket, "log", split.table_id, split.start_offset, split.end_offset]


def _decode_split(raw: object, where: str) -> Split:
    if not isinstance(raw, list) or len(raw) != 6:
        raise ValueError(f"offset field '{where}' must be a list of 6 items, got {raw!r}")
    table, bucket, kind, table_id, a, b = raw
    if not isinstance(table, str) or not table:
        raise ValueError(f"offset field '{where}[0]' (table) must be a non-empty string, got {table!r}")
    bucket, table_id = _int(bucket, f"{where}[1]"), _int(table_id, f"{where}[3]")
    a, b = _int(a, f"{where}[4]"), _int(b, f"{where}[5]")
    try:
        if kind == "snapshot":
            return SnapshotSplit(table, bucket, table_id, a, b)
        if kind == "log":
            return LogSplit(table, bucket, table_id, a, b)
    except ValueError as e:
        raise ValueError(f"offset field '{where}': {e}") from None
    raise ValueError(f"offset field '{where}[2]' (kind) must be 'snapshot' or 'log', got {kind!r}")


def _decode_tables(raw: object) -> dict[str, TableOffset]:
    if not isinstance(raw, dict):
        raise ValueError(f"offset field 'tables' must be an object, got {type(raw).__name__}")
    tables = {}
    for name, t in raw.items():
        where = f"tables.{name}"
        if not isinstance(t, dict):
            raise ValueError(f"offset field '{where}' must be an object, got {t!r}")
        unknown = sorted(set(t) - {"table_id", "buckets"})
        if unknown:
            raise ValueError(f"offset field '{where}' has unknown fields {unknown}")
        table_id = _int(_required(t, "table_id", where), f"{where}.table_id")
        raw_buckets = _required(t, "buckets", where)
        if not isinstance(raw_buckets, dict):
            raise ValueError(f"offset field '{where}.buckets' must be an object, got {raw_buckets!r}")
        buckets = {}
        for key, pos in raw_buckets.items():
            bwhere = f"{where}.buckets.{key}"
            if not key.isdigit():
                raise ValueError(f"offset field '{bwhere}': bucket key must be a non-negative integer")
            if not isinstance(pos, dict) or set(pos) - {"log", "snapshot"}:
                raise ValueError(f"offset field '{bwhere}' must be {{\"log\": int, \"snapshot\": int|null}}, got {pos!r}")
            log = _int(_required(pos, "log", bwhere), f"{bwhere}.log")
            snap = pos.get("snapshot")
            buckets[int(key)] = BucketPosition(log, None if snap is None else _int(snap, f"{bwhere}.snapshot"))
        tables[name] = TableOffset(table_id, buckets)
    return tables


def _required(data: dict, key: str, where: str = "") -> object:
    if key not in data:
        name = f"{where}.{key}" if where else key
        raise ValueError(f"offset field '{name}' is missing")
    return data[key]


def _int(value: object, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"offset field '{where}' must be a non-negative integer, got {value!r}")
    return value
