"""The Spark streaming data source ``kv-tiering``: the enumerator that plans rounds.

Failure modes it is built around (DESIGN §4):
- Spark calls ``initialOffset()`` more than once and again on replay, and compares offsets as
  JSON strings: the initial offset comes from the lease-id file, and offsets are encoded by
  :class:`TieringOffset` in one canonical form;
- ``partitions(start, end)`` is called again for a replayed batch in a new process: it depends
  only on ``end``, which carries the round's splits;
- a snapshot could be garbage-collected between planning and reading: every snapshot split is
  leased *before* its offset is returned, and buckets whose snapshot is already gone are
  dropped from the round and re-planned next round;
- ``commit()`` runs one batch late and ``stop()`` may never run: neither releases anything; the
  round committer releases each table's buckets, and the job drops the lease on a clean stop.

The source emits split descriptors (:mod:`tiering.enumerator.descriptor`), not table rows.
The planning reader lives in one long-lived Python process per query run; executors get a
pickled copy, so clients are created lazily and never pickled.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)

from tiering.conf.model import TablesConfig
from tiering.enumerator.descriptor import DESCRIPTOR_SCHEMA, to_descriptor
from tiering.enumerator.planner import RoundPlan, RoundPlanner, TableInput
from tiering.kvstore.models import BucketLog

log = logging.getLogger(__name__)

#: Consecutive rounds an availableNow run re-plans a table whose lake position does not move
#: (its writes keep failing) before it gives up on that table, so the run can end.
AVAILABLE_NOW_MAX_ATTEMPTS = 3


def _bool(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ValueError(f"kv-tiering option {name!r}: expected true or false, got {value!r}")


def _int(name: str, value: str, minimum: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"kv-tiering option {name!r}: expected an integer, got {value!r}") from None
    if number < minimum:
        raise ValueError(f"kv-tiering option {name!r}: expected an integer >= {minimum}, got {number}")
    return number


def _patterns(name: str, value: str) -> list[str]:
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if not isinstance(parsed, list) or not all(isinstance(p, str) for p in parsed):
        raise ValueError(f"kv-tiering option {name!r}: expected a JSON list of glob patterns, got {value!r}")
    return parsed


@dataclass(frozen=True)
class SourceOptions:
    """The source's options, validated once on the driver (a typo fails the query at start)."""

    store_url: str
    job: str
    checkpoint: str
    lake_root: str
    epoch: int
    lease_duration_ms: int
    tables: TablesConfig
    store_token: str | None = None
    max_splits: int = 0
    max_bytes: int = 0
    fail_on_data_loss: bool = False

    REQUIRED = ("kvstore.url", "job", "checkpoint", "lake.root", "epoch")
    OPTIONAL = (
        "kvstore.token", "lease.duration_ms", "tables.include", "tables.exclude",
        "max_splits_per_trigger", "max_bytes_per_trigger", "fail_on_data_loss",
    )

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        opts = {k.lower(): v for k, v in options.items() if k.lower() != "path"}
        unknown = sorted(set(opts) - set(cls.REQUIRED) - set(cls.OPTIONAL))
        if unknown:
            raise ValueError(f"kv-tiering: unknown options {unknown}; expected some of {cls.REQUIRED + cls.OPTIONAL}")
        missing = [k for k in cls.REQUIRED if not opts.get(k)]
        if missing:
            raise ValueError(f"kv-tiering: required options missing: {missing}")
        return cls(
            store_url=opts["kvstore.url"],
            store_token=opts.get("kvstore.token") or None,
            job=opts["job"],
            checkpoint=opts["checkpoint"],
            lake_root=opts["lake.root"],
            epoch=_int("epoch", opts["epoch"], 0),
            lease_duration_ms=_int("lease.duration_ms", opts.get("lease.duration_ms", "600000"), 1),
            tables=TablesConfig(
                include=_patterns("tables.include", opts.get("tables.include", '["*"]')),
                exclude=_patterns("tables.exclude", opts.get("tables.exclude", "[]")),
            ),
            max_splits=_int("max_splits_per_trigger", opts.get("max_splits_per_trigger", "0"), 0),
            max_bytes=_int("max_bytes_per_trigger", opts.get("max_bytes_per_trigger", "0"), 0),
            fail_on_data_loss=_bool("fail_on_data_loss", opts.get("fail_on_data_loss", "false")),
        )


@dataclass(frozen=True)
class RoundPartition(InputPartition):
    """One table's descriptors of a round."""

    rows: tuple[tuple, ...] = field(default=())


class KvTieringDataSource(DataSource):
    """Streaming source ``kv-tiering``: plans tiering rounds over the tables of a KV store.

    Options (strings): ``kvstore.url`` and ``kvstore.token``; ``job`` (name); ``checkpoint``
    (the query's checkpoint location: the lease id is kept in ``<checkpoint>/tiering/``);
    ``lake.root``; ``epoch`` (this leader term's epoch, carried by every lease call);
    ``lease.duration_ms``; ``tables.include`` / ``tables.exclude`` (JSON lists of globs);
    ``max_splits_per_trigger`` / ``max_bytes_per_trigger`` (0 = no limit);
    ``fail_on_data_loss``. Each row is one split (see :mod:`tiering.enumerator.descriptor`).
    """

    @classmethod
    def name(cls) -> str:
        return "kv-tiering"

    def schema(self) -> str:
        return DESCRIPTOR_SCHEMA

    def streamReader(self, schema) -> KvTieringStreamReader:
        return KvTieringStreamReader(SourceOptions.parse(self.options))


class KvTieringStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._client = None
        self._lease = None
        self._lease_id: str | None = None
        self._targets: dict[str, dict[int, int]] | None = None
        self._stalled: dict[str, tuple[tuple, int]] = {}

    def __getstate__(self) -> dict:
        # Executors only need the options; clients and planning state stay on the driver.
        return {"options": self.options}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["options"])

    # -- planning side (one long-lived process per query run) --------------------------------

    @property
    def client(self):
        if self._client is None:
            from tiering.kvstore.client import KvStoreClient

            self._client = KvStoreClient(self.options.store_url, self.options.store_token)
        return self._client

    @property
    def lease_id(self) -> str:
        if self._lease_id is None:
            from tiering.state.lease_file import load_or_create_lease_id

            self._lease_id = load_or_create_lease_id(self.options.checkpoint, self.options.job)
        return self._lease_id

    @property
    def lease(self):
        if self._lease is None:
            from tiering.lease.job_lease import JobLease

            self._lease = JobLease(self.client, self.lease_id, self.options.epoch, self.options.lease_duration_ms)
        return self._lease

    def initialOffset(self) -> dict:
        from tiering.state.offset import TieringOffset

        return TieringOffset.initial(self.lease_id, 0).to_dict()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_splits:
            return ReadMaxFiles(self.options.max_splits)
        if self.options.max_bytes:
            return ReadMaxBytes(self.options.max_bytes)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the log ends to reach now, so an availableNow run ends even while writes go on."""
        self._targets = {
            t.name: {b.bucket: b.log_end_offset for b in self.client.log_info(t.name).buckets}
            for t in self._tables()
        }
        log.info("availableNow: tiering %d tables up to their current log ends", len(self._targets))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        from tiering.state.offset import TieringOffset

        previous = TieringOffset.from_dict(start)
        plan = self._plan(previous.round + 1, limit, {s.table for s in previous.splits})
        if plan.splits:
            unavailable = self.lease.acquire(plan.snapshot_refs())
            if unavailable:
                log.warning("round=%d snapshots gone before they could be leased: %s", plan.round, unavailable)
                plan = plan.without_buckets(unavailable)
        if not plan.splits:
            return start
        for skipped in plan.skipped:
            log.info("round=%d table=%s bucket=%d skipped: %s", plan.round, skipped.table, skipped.bucket, skipped.reason)
        offset = TieringOffset.after_round(plan, lease_id=self.lease_id, epoch=self.options.epoch)
        merged = dict(previous.tables)
        merged.update(offset.tables)
        return TieringOffset(
            lease_id=offset.lease_id, epoch=offset.epoch, round=offset.round, tables=merged, splits=offset.splits
        ).to_dict()

    def _tables(self):
        return [t for t in self.client.list_tables() if self.options.tables.selects(t.name)]

    def _plan(self, round_id: int, limit: ReadLimit, planned_before: set[str]) -> RoundPlan:
        from tiering.lake.positions import read_position

        inputs = []
        for info in self._tables():
            if self._targets is not None and info.name not in self._targets:
                continue
            lake = read_position(self.options.lake_root, info.name)
            position = getattr(lake, "position", lake)
            if self._gave_up(info.name, position, info.name in planned_before):
                continue
            logs = self.client.log_info(info.name)
            if logs.table_id != info.table_id:
                continue  # re-created between the two calls: plan it next round
            inputs.append(
                TableInput(
                    info=info,
                    snapshots=self.client.latest_snapshots(info.name).buckets,
                    logs=self._capped(info.name, logs.buckets),
                    lake=position,
                )
            )
        unlimited = isinstance(limit, ReadAllAvailable)
        planner = RoundPlanner(
            max_splits=0 if unlimited else self.options.max_splits,
            max_bytes=0 if unlimited else self.options.max_bytes,
            fail_on_data_loss=self.options.fail_on_data_loss,
        )
        return planner.plan(round_id, inputs)

    def _capped(self, table: str, logs: list[BucketLog]) -> list[BucketLog]:
        if self._targets is None:
            return list(logs)
        target = self._targets[table]
        return [
            b.model_copy(update={"log_end_offset": max(b.log_start_offset, min(b.log_end_offset, target.get(b.bucket, 0)))})
            for b in logs
        ]

    def _gave_up(self, table: str, position, planned_before: bool) -> bool:
        """In an availableNow run, stop re-planning a table whose lake position never moves."""
        if self._targets is None:
            return False
        seen, attempts = self._stalled.get(table, (None, 0))
        if attempts > AVAILABLE_NOW_MAX_ATTEMPTS:
            return True
        if not planned_before:
            self._stalled.pop(table, None)
            return False
        key = (position.table_id, tuple(sorted(position.buckets.items()))) if position else ()
        attempts = attempts + 1 if seen == key else 1
        self._stalled[table] = (key, attempts)
        if attempts > AVAILABLE_NOW_MAX_ATTEMPTS:
            log.error("table=%s made no progress in %d rounds: left out of this availableNow run", table, attempts)
            return True
        return False

    def partitions(self, start: dict, end: dict) -> list[RoundPartition]:
        from tiering.state.offset import TieringOffset

        offset = TieringOffset.from_dict(end)
        by_table: dict[str, list[tuple]] = {}
        for split in offset.splits:
            by_table.setdefault(split.table, []).append(to_descriptor(split, offset.round))
        return [RoundPartition(tuple(rows)) for _, rows in sorted(by_table.items())]

    def commit(self, end: dict) -> None:
        """Nothing to do: leases are released per table by the round committer."""

    # -- executor side ------------------------------------------------------------------------

    def read(self, partition: RoundPartition):
        yield from partition.rows
