"""The Spark source's checkpointed offset, versioned (docs/DESIGN.md §4).

Failure modes: Spark compares offsets as JSON strings, so two encodings of the same state
that differ in key order or whitespace look like new data and replay a batch; a checkpoint
written by an older version must keep decoding after an upgrade; and the entry is written every
round and carried as start and end offset of every streaming progress event the driver keeps
(JVM and Python), so its size is memory and disk the job pays per round. Hence one canonical
encoding (fixed key order, no whitespace, tables by name, splits in :func:`sort_key` order),
nothing in it that is not read back, and a decoder that accepts every version it has ever
written.

Versions:
- v2 (written): ``{"v": 2, "lease_id": ..., "epoch": ..., "round": ..., "splits": {...}}``.
  ``splits`` is the round's plan grouped by table, so a table's name and id are written once,
  not once per split: ``{"orders": {"id": 3, "snapshot": [[bucket, snapshot_id, log_offset],
  ...], "log": [[bucket, start_offset, end_offset], ...]}}`` (log start inclusive, end
  exclusive; a kind with no split is left out, a table with none is not listed);
- v1: ``{"v": 1, "lease_id": ..., "epoch": ..., "round": ..., "tables": {...}, "splits": [...]}``,
  a split a list ``[table, bucket, "snapshot", table_id, snapshot_id, log_offset]`` or
  ``[table, bucket, "log", table_id, start_offset, end_offset]``;
- v0: ``{"epoch": ..., "round": ..., "tables": {...}}`` (no lease id, no splits). It decodes
  with ``lease_id=None``; set one (``dataclasses.replace``) before encoding it.

v0 and v1 ``tables`` held each table's positions after the round. Nothing read them back
(rounds are planned from the lake, whose commits carry the positions): v2 leaves them out, and
the decoder checks that an old entry has them and skips them. ``splits`` is the round's plan,
so ``partitions(start, end)`` needs only ``end``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tiering.enumerator.splits import LogSplit, SnapshotSplit, Split, sort_key

__all__ = ["CURRENT_VERSION", "LastOffset", "TieringOffset"]

CURRENT_VERSION = 2

#: The fields of each version's top-level object.
_FIELDS = {
    0: {"epoch", "round", "tables"},
    1: {"v", "lease_id", "epoch", "round", "tables", "splits"},
    2: {"v", "lease_id", "epoch", "round", "splits"},
}


@dataclass(frozen=True)
class TieringOffset:
    """The state Spark checkpoints after each planned round. ``splits`` are kept in
    :func:`sort_key` order whatever order they are given in, so equal rounds are equal values
    and encode to the same string."""

    lease_id: str | None
    epoch: int
    round: int
    splits: tuple[Split, ...] = ()
    version: int = CURRENT_VERSION

    def __post_init__(self) -> None:
        object.__setattr__(self, "splits", tuple(sorted(self.splits, key=sort_key)))

    @classmethod
    def initial(cls, lease_id: str, epoch: int) -> TieringOffset:
        """Round 0: nothing tiered yet, nothing planned."""
        return cls(lease_id=lease_id, epoch=epoch, round=0)

    def to_dict(self) -> dict:
        if self.lease_id is None:
            raise ValueError("offset field 'lease_id' is required to encode an offset (a v0 offset has none)")
        return {
            "v": CURRENT_VERSION,
            "lease_id": self.lease_id,
            "epoch": self.epoch,
            "round": self.round,
            "splits": _encode_splits(self.splits),
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
        unknown = sorted(set(data) - _FIELDS[version])
        if unknown:
            raise ValueError(f"offset v{version} has unknown fields {unknown}")
        if version < 2:
            _object(_required(data, "tables"), "tables")  # positions, not read back (module docstring)
        lease_id: str | None = None
        splits: tuple[Split, ...] = ()
        if version >= 1:
            found = _required(data, "lease_id")
            if not isinstance(found, str) or not found:
                raise ValueError(f"offset field 'lease_id' must be a non-empty string, got {found!r}")
            lease_id = found
            raw = _required(data, "splits")
            splits = _decode_v1_splits(raw) if version == 1 else _decode_v2_splits(raw)
        return cls(
            lease_id=lease_id,
            epoch=_int(_required(data, "epoch"), "epoch"),
            round=_int(_required(data, "round"), "round"),
            splits=splits,
            version=version,
        )


class LastOffset:
    """The offset a planning reader last returned or decoded, kept as Spark holds it (a dict) and
    decoded. Spark hands the newest offset back every trigger, and decoding a bootstrap round's
    splits again each time would cost an idle round far more than comparing two dicts does. One
    planning thread asks at a time (Spark calls ``latestOffset`` serially)."""

    def __init__(self) -> None:
        self._last: tuple[dict, TieringOffset] | None = None

    def decoded(self, encoded: dict) -> TieringOffset:
        """``encoded`` decoded; the kept offset itself when ``encoded`` equals its dict."""
        if self._last is not None and self._last[0] == encoded:
            return self._last[1]
        offset = TieringOffset.from_dict(encoded)
        self._last = (encoded, offset)
        return offset

    def encoded(self, offset: TieringOffset) -> dict:
        """``offset`` as Spark is handed it, kept: the start Spark hands back next."""
        encoded = offset.to_dict()
        self._last = (encoded, offset)
        return encoded


def _encode_splits(splits: tuple[Split, ...]) -> dict[str, dict]:
    """v2's ``splits``: per table (by name, as ``splits`` are sorted) its id, then its snapshot
    and log splits by bucket."""
    tables: dict[str, dict] = {}
    for s in splits:
        entry = tables.setdefault(s.table, {"id": s.table_id})
        if entry["id"] != s.table_id:
            raise ValueError(f"offset: table {s.table!r} has splits for table ids {entry['id']} and {s.table_id}")
        if isinstance(s, SnapshotSplit):
            entry.setdefault("snapshot", []).append([s.bucket, s.snapshot_id, s.log_offset])
        else:
            entry.setdefault("log", []).append([s.bucket, s.start_offset, s.end_offset])
    return {name: {k: entry[k] for k in ("id", "snapshot", "log") if k in entry} for name, entry in tables.items()}


def _decode_v2_splits(raw: object) -> tuple[Split, ...]:
    """v2's ``splits`` back into splits (put in order by :class:`TieringOffset`)."""
    splits: list[Split] = []
    for table, entry in _object(raw, "splits").items():
        where = f"splits.{table}"
        if not table:
            raise ValueError(f"offset field '{where}': the table name must be non-empty")
        entry = _object(entry, where)
        unknown = sorted(set(entry) - {"id", "snapshot", "log"})
        if unknown:
            raise ValueError(f"offset field '{where}' has unknown fields {unknown}")
        if not entry.keys() & {"snapshot", "log"}:
            raise ValueError(f"offset field '{where}' has no 'snapshot' and no 'log' splits")
        table_id = _int(_required(entry, "id", where), f"{where}.id")
        for kind, make in (("snapshot", SnapshotSplit), ("log", LogSplit)):
            if kind not in entry:
                continue
            items = entry[kind]
            if not isinstance(items, list) or not items:
                raise ValueError(f"offset field '{where}.{kind}' must be a non-empty list, got {items!r}")
            for i, item in enumerate(items):
                bucket, a, b = _three_ints(item, where, kind, i)
                try:
                    splits.append(make(table, bucket, table_id, a, b))
                except ValueError as e:
                    raise ValueError(f"offset field '{where}.{kind}[{i}]': {e}") from None
    return tuple(splits)


def _three_ints(item: object, where: str, kind: str, i: int) -> tuple[int, int, int]:
    """``item`` as three non-negative ints. The field's name is built only to refuse it: Spark
    hands the source its last offset every trigger, and after a bootstrap of 10,000 tables that is
    40,000 items (naming each one tripled the time to decode them)."""
    if type(item) is list and len(item) == 3:
        x, y, z = item
        if type(x) is int and type(y) is int and type(z) is int and x >= 0 and y >= 0 and z >= 0:
            return x, y, z
    name = f"{where}.{kind}[{i}]"
    if not isinstance(item, list) or len(item) != 3:
        raise ValueError(f"offset field '{name}' must be a list of 3 items, got {item!r}")
    x, y, z = (_int(v, f"{name}[{j}]") for j, v in enumerate(item))
    return x, y, z


def _decode_v1_splits(raw: object) -> tuple[Split, ...]:
    """v1's ``splits``: one list per split, naming its table and table id."""
    if not isinstance(raw, list):
        raise ValueError(f"offset field 'splits' must be a list, got {type(raw).__name__}")
    splits = []
    for i, item in enumerate(raw):
        where = f"splits[{i}]"
        if not isinstance(item, list) or len(item) != 6:
            raise ValueError(f"offset field '{where}' must be a list of 6 items, got {item!r}")
        table, bucket, kind, table_id, a, b = item
        if not isinstance(table, str) or not table:
            raise ValueError(f"offset field '{where}[0]' (table) must be a non-empty string, got {table!r}")
        make = _KINDS.get(kind)
        if make is None:
            raise ValueError(f"offset field '{where}[2]' (kind) must be 'snapshot' or 'log', got {kind!r}")
        bucket, table_id = _int(bucket, f"{where}[1]"), _int(table_id, f"{where}[3]")
        splits.append(_split(make, where, table, bucket, table_id, _int(a, f"{where}[4]"), _int(b, f"{where}[5]")))
    return tuple(splits)


#: A v1 split's kind, as written, and the split it decodes to.
_KINDS: dict[str, type[SnapshotSplit] | type[LogSplit]] = {"snapshot": SnapshotSplit, "log": LogSplit}


def _split(make: type[Split], where: str, table: str, bucket: int, table_id: int, a: int, b: int) -> Split:
    """``make(table, bucket, table_id, a, b)``, its own check's error naming the field."""
    try:
        return make(table, bucket, table_id, a, b)
    except ValueError as e:
        raise ValueError(f"offset field '{where}': {e}") from None


def _object(value: object, where: str) -> dict:
    if not isinstance(value, dict):
        raise ValueError(f"offset field '{where}' must be an object, got {type(value).__name__}")
    return value


def _required(data: dict, key: str, where: str = "") -> object:
    if key not in data:
        name = f"{where}.{key}" if where else key
        raise ValueError(f"offset field '{name}' is missing")
    return data[key]


def _int(value: object, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"offset field '{where}' must be a non-negative integer, got {value!r}")
    return value
