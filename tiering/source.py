"""The Spark streaming data source ``kv-tiering``: the enumerator that plans rounds.

Failure modes it is built around (docs/DESIGN.md §4):
- Spark calls ``initialOffset()`` more than once and again on replay, and compares offsets as
  JSON strings: the initial offset comes from the lease-id file, and offsets are encoded by
  :class:`TieringOffset` in one canonical form;
- ``partitions(start, end)`` is called again for a replayed batch in a new process: it depends
  only on ``end``, which carries the round's splits;
- a snapshot could be garbage-collected between planning and reading: every snapshot split is
  leased *before* its offset is returned, and buckets whose snapshot is already gone are
  dropped from the round and re-planned next round;
- ``commit()`` runs one batch late and ``stop()`` may never run: neither releases anything; the
  round committer releases each table's buckets, and the job drops the lease on a clean stop;
- the planning process is stopped by its socket closing, and would print the resulting stack
  trace on the driver's stderr: ``stop()`` makes that exit quiet.

The source emits split descriptors (:mod:`tiering.enumerator.descriptor`), not table rows.
The planning reader lives in one long-lived Python process per query run; executors get a
pickled copy, so clients are created lazily and never pickled, and what only planning needs is
imported when planning: every Python process Spark starts for the source imports this module
(the source's creation, the planning process, each batch's read planning, the executors), and
only the planning process uses the term context, so the option is parsed into one (with the
config models) when planning first needs it. Its only option is the term context the leader
loop built (config, epoch, lease id): nothing is defaulted here.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from tiering.enumerator.descriptor import DESCRIPTOR_SCHEMA, to_descriptor
from tiering.errors import ConfigError, FencedEpochError, LakeReadError, TableEpochFencedError
from tiering.state.offset import TieringOffset

try:  # Spark >= 4.2: admission control and availableNow for Python sources
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxBytes,
        ReadMaxFiles,
        SupportsTriggerAvailableNow,
    )

    ADMISSION_CONTROL = True
except ImportError:  # Spark 4.0, 4.1: latestOffset() gets no start and no limit (tiering.spark_version)
    ADMISSION_CONTROL = False

    class ReadLimit:  # type: ignore[no-redef]  # stand-ins: no limit ever reaches latestOffset there
        pass

    class ReadAllAvailable(ReadLimit):  # type: ignore[no-redef]
        pass

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]  # Spark's own availableNow wrapper there
        pass


if TYPE_CHECKING:
    from tiering.context import TermContext
    from tiering.coord.ownership import Ownership, TableClaims
    from tiering.enumerator.planner import RoundPlan, TableInput
    from tiering.enumerator.positions import LakePosition
    from tiering.enumerator.schedule import FreshnessSchedule, Identity
    from tiering.enumerator.settled import Logs
    from tiering.kvstore.contract import PlanningStore, StoreTable, TableLog

log = logging.getLogger(__name__)

#: Consecutive rounds an availableNow run re-plans a table whose lake position does not move
#: (its writes keep failing) before it gives up on that table, so the run can end.
AVAILABLE_NOW_MAX_ATTEMPTS = 3

#: The driver's log line format (``tiering`` commands), for the planning process's lines.
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: The source's one option: the term context as JSON (:meth:`TermContext.to_option`). It
#: carries the store token, so its key matches Spark's default ``spark.redaction.regex``:
#: plans and query errors print its value as ``*********(redacted)``.
CONTEXT_OPTION = "term_context_secret"


def quiet_on_disconnect(print_error: Callable[..., None]) -> Callable[..., None]:
    """``sys.excepthook`` that prints nothing for an error caused, at any depth of its context,
    by the JVM closing the connection (EOF, a broken pipe or a reset), and hands the rest to
    ``print_error``."""

    def hook(kind: type[BaseException], error: BaseException, trace: TracebackType | None) -> None:
        cause: BaseException | None = error
        while cause is not None:
            if isinstance(cause, (EOFError, BrokenPipeError, ConnectionResetError)):
                return
            cause = cause.__context__
        print_error(kind, error, trace)

    return hook


def log_to_stderr(level: int | None) -> None:
    """Give this package's log lines the driver's format on stderr from ``level`` on (None: leave
    logging as it is), unless logging is set up already.

    The planning process is a Python process Spark starts: its stderr reaches the driver's output,
    but nothing sets its logging up, so its INFO lines (the buckets a round skips, the tables that
    wait for their freshness targets) were dropped and its warnings printed bare. The driver says
    at which level it logs to stderr, if it does (``TermContext.log_level``). Only the package's
    logger gets the handler: the libraries' INFO lines (one per store request) stay out."""
    ours = logging.getLogger("tiering")
    if (
        level is None
        or logging.getLogger().handlers
        or any(not isinstance(h, logging.NullHandler) for h in ours.handlers)
    ):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    ours.addHandler(handler)
    ours.setLevel(level)


def checkpoint(plan: RoundPlan, *, lease_id: str, epoch: int) -> TieringOffset:
    """The offset Spark checkpoints for ``plan``: the round's splits only, so the entry's size
    follows the round, not the number of tables the job tiers (Spark writes the offset every
    round; carrying every table's positions cost about 1 MB a round at 10,000 idle tables)."""
    return TieringOffset(lease_id=lease_id, epoch=epoch, round=plan.round, splits=plan.splits)


@dataclass(frozen=True)
class RoundPartition(InputPartition):
    """A round's split descriptors: one partition for the whole round. The rows are a few bytes
    per split, and every extra partition is a Spark task with a Python worker to start (a round
    of hundreds of tables would pay hundreds of them for nothing)."""

    rows: tuple[tuple, ...] = field(default=())


class KvTieringDataSource(DataSource):
    """Streaming source ``kv-tiering``: plans tiering rounds over the tables of a KV store.

    One option, :data:`CONTEXT_OPTION`: the term context (``TermContext.to_option()``) — the
    validated config, this term's epoch (carried by every lease call) and the job's lease id.
    Each row is one split (see :mod:`tiering.enumerator.descriptor`).
    """

    @classmethod
    def name(cls) -> str:
        return "kv-tiering"

    def schema(self) -> str:
        return DESCRIPTOR_SCHEMA

    def streamReader(self, schema) -> KvTieringStreamReader:
        options = {k.lower(): v for k, v in self.options.items() if k.lower() != "path"}
        unknown = sorted(set(options) - {CONTEXT_OPTION})
        if unknown or CONTEXT_OPTION not in options:
            raise ConfigError(
                [
                    f"kv-tiering source: expected exactly the option {CONTEXT_OPTION!r} "
                    f"(TermContext.to_option()), got {sorted(options)}"
                ]
            )
        return KvTieringStreamReader(options[CONTEXT_OPTION])


class KvTieringStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, option: str) -> None:
        self._option = option
        self._context: TermContext | None = None
        self._store: PlanningStore | None = None
        self._lease = None
        self._lake = None
        self._making_lake = threading.Lock()
        self._settled = None
        self._schedule: FreshnessSchedule | None = None
        self._selected: dict[str, bool] = {}
        self._own_targets: dict[str, float | None] = {}
        self._lake_read: set[str] = set()  # tables whose lake this process read at least once
        self._targets: dict[str, dict[int, int]] | None = None
        self._stalled: dict[str, tuple[tuple, int]] = {}
        self._last: tuple[dict, TieringOffset] | None = None  # the last offset seen, as given and decoded

    def __getstate__(self) -> dict:
        # Executors only need the option; clients and planning state stay on the driver.
        return {"option": self._option}

    def __setstate__(self, state: dict) -> None:
        KvTieringStreamReader.__init__(self, state["option"])

    # -- planning side (one long-lived process per query run) --------------------------------

    @property
    def context(self) -> TermContext:
        """The term context, parsed from the option at first use (a malformed one is a
        :class:`ConfigError` there): the pydantic config models cost a Python process ~0.2 s of
        CPU to import, and only the planning process needs them."""
        if self._context is None:
            from tiering.context import TermContext

            self._context = TermContext.from_option(self._option)
            log_to_stderr(self._context.log_level)
        return self._context

    @property
    def store(self) -> PlanningStore:
        """The term's store behind the seam (:mod:`tiering.kvstore.contract`): what planning reads."""
        if self._store is None:
            self._store = self.context.planning_store()
        return self._store

    @property
    def lease(self):
        """The term's lease as seen from this process. The driver has its own handle of the same
        lease (renewer, releases, drop): this one must exist because Spark runs the planning
        reader in a Python process of its own, which shares no object with the driver."""
        if self._lease is None:
            self._lease = self.context.job_lease(self.store)
        return self._lease

    @property
    def settled(self):
        """The tables this process found caught up, skipped while their log ends stay put."""
        if self._settled is None:
            from tiering.enumerator.settled import SettledTables

            self._settled = SettledTables()
        return self._settled

    @property
    def schedule(self) -> FreshnessSchedule | None:
        """Which changed tables a round plans (:mod:`tiering.enumerator.schedule`); None, every
        changed table planned, when no table has a target of its own, and in an availableNow run:
        it tiers everything there is, then ends."""
        config = self.context.config
        if self._targets is not None or config.trigger.available_now or not config.tables.freshness_targets:
            return None
        if self._schedule is None:
            from tiering.enumerator.schedule import FreshnessSchedule

            self._schedule = FreshnessSchedule(self.context.config.trigger.interval_s)
        return self._schedule

    @property
    def lake(self):
        """The lake's tables as this process last saw them (read incrementally round by round).
        Made under a lock: the planning threads ask for it first, and each thread that made its
        own would keep its tables' views in a copy the next round no longer sees (each such
        table's Delta log was then read afresh every round: on S3, nine requests, not two)."""
        with self._making_lake:
            if self._lake is None:
                from tiering.delta_log.lake import LakeTables

                self._lake = LakeTables(self.context.lake)
        return self._lake

    def initialOffset(self) -> dict:
        return TieringOffset.initial(self.context.lease_id, self.context.epoch).to_dict()

    def getDefaultReadLimit(self) -> ReadLimit:
        """Spark >= 4.2 only (Spark 4.0 and 4.1 never call it)."""
        limits = self.context.config.limits
        if limits.max_splits_per_trigger:
            return ReadMaxFiles(limits.max_splits_per_trigger)
        if limits.max_bytes_per_trigger:
            return ReadMaxBytes(limits.max_bytes_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the log ends to reach now, so an availableNow run ends even while writes go on."""
        selected = {t.name for t in self._tables(self.context.ownership())}
        self._targets = {
            name: {bucket: b.end for bucket, b in logs.buckets.items()}
            for name, logs in self.store.log_ends().items()
            if name in selected
        }
        log.info("availableNow: tiering %d tables up to their current log ends", len(self._targets))

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        """The next round's offset, or ``start`` when there is nothing to tier. Spark 4.0 and 4.1
        pass neither argument: ``start`` is then the offset Spark logged last, which is what a
        newer Spark passes, the round is capped by ``limits.*`` as a default read limit would cap
        it, and an availableNow run fixes its targets at its first call."""
        if start is None:
            start = self._logged_offset()
            if self._targets is None and self.context.config.trigger.available_now:
                self.prepareForTriggerAvailableNow()  # the job triggers the rounds itself there
        previous = self._decoded(start)
        self._check_term(previous)
        plan, identities = self._plan(previous.round + 1, limit, {s.table for s in previous.splits})
        if plan.splits:
            try:
                unavailable = self.lease.acquire(plan.snapshot_refs(), self._owners(plan))
            except TableEpochFencedError as e:  # the leader's next rebalance gives the table up
                log.warning("round=%d not planned: a table moved to another member of the group: %s", plan.round, e)
                return start
            if unavailable:
                log.warning("round=%d snapshots gone before they could be leased: %s", plan.round, unavailable)
                plan = plan.without_buckets(unavailable)
        if not plan.splits:
            return start
        for skipped in plan.skipped:
            log.info(
                "round=%d table=%s bucket=%d skipped: %s", plan.round, skipped.table, skipped.bucket, skipped.reason
            )
        self._scheduled(plan, identities)
        offset = checkpoint(plan, lease_id=self.context.lease_id, epoch=self.context.epoch)
        encoded = offset.to_dict()
        self._last = (encoded, offset)
        return encoded

    def _scheduled(self, plan: RoundPlan, reads: dict[str, tuple[Identity, dict[int, int]]]) -> None:
        """Tell the schedule which tables ``plan`` hands out, each up to the log ends this trigger
        read (or in part: a read limit held a bucket back, or a bucket was skipped), and log in
        one line how many tables wait for their freshness targets (changed, or due the settled
        re-check)."""
        schedule = self.schedule
        if schedule is None:
            return
        partial = {t for t, _ in plan.deferred} | {s.table for s in plan.skipped}
        for table in plan.tables:
            identity, ends = reads[table.table]
            schedule.planned(table.table, identity, None if table.table in partial else ends)
        if schedule.held:
            log.info(
                "round=%d plans %d tables; %d tables wait for their freshness targets (first due in %.1f s)",
                plan.round,
                len({s.table for s in plan.splits}),
                len(schedule.held),
                max(0.0, min(schedule.held.values())),
            )

    def _owners(self, plan: RoundPlan) -> TableClaims | None:
        """In a tiering group, the table epochs of the tables whose snapshots ``plan`` holds: the
        store refuses the acquire when one of them moved to another member."""
        owned = self.context.ownership()
        if owned is None:
            return None
        from tiering.enumerator.splits import SnapshotSplit

        return owned.claims({s.table_id: s.table for s in plan.splits if isinstance(s, SnapshotSplit)})

    def _decoded(self, start: dict) -> TieringOffset:
        """``start`` decoded, or the offset this process last returned or decoded when ``start``
        equals it: Spark hands back the newest offset every trigger, and decoding the 40,000
        splits of a 10,000-table bootstrap was most of an idle round's planning CPU (comparing
        the two dicts costs a few per cent of that)."""
        if self._last is not None and self._last[0] == start:
            return self._last[1]
        decoded = TieringOffset.from_dict(start)
        self._last = (start, decoded)
        return decoded

    def _logged_offset(self) -> dict:
        """The end offset of the newest batch in the checkpoint's offsets log (Spark writes it
        before the batch runs, so it is the next batch's start), or the initial offset."""
        from tiering.state.offset_log import newest_batch, read_batch_offset

        checkpoint = self.context.checkpoint
        newest = newest_batch(checkpoint)
        if newest is None:
            return self.initialOffset()
        return read_batch_offset(checkpoint, newest).to_dict()

    def _check_term(self, previous: TieringOffset) -> None:
        """The checkpoint's last offset says which term planned it and under which lease: a newer
        epoch there means this process plans for a term that is over; another lease id means the
        checkpoint's lease file was replaced, and that lease's holds lapse on their own."""
        if previous.epoch > self.context.epoch:
            raise FencedEpochError(
                f"job {self.context.job!r}: the checkpoint's last round was planned by epoch {previous.epoch}, "
                f"this term is epoch {self.context.epoch}; a newer leader exists",
                epoch=self.context.epoch,
            )
        if previous.lease_id not in (None, self.context.lease_id):
            log.warning(
                "job=%s: the checkpoint's offsets name lease %s, this term uses %s; the old lease "
                "lapses after lease.duration_s",
                self.context.job,
                previous.lease_id,
                self.context.lease_id,
            )

    def _tables(self, owned: Ownership | None = None) -> list[StoreTable]:
        """The selected tables; each name matched against the patterns once per process (at
        10,000 tables, matching every name every round is a tenth of an idle round). In a tiering
        group, only those the leader took for this member (``owned``, its ownership file, read each
        round): a table newly owned is planned from the lake's positions, as in a new term."""
        selection = self.context.config.tables
        chosen = []
        for t in self.store.tables():
            selected = self._selected.get(t.name)
            if selected is None:
                selected = self._selected[t.name] = selection.selects(t.name)
            if selected and (owned is None or owned.epoch(t.name) is not None):
                chosen.append(t)
        return chosen

    def _plan(
        self, round_id: int, limit: ReadLimit | None, planned_before: set[str]
    ) -> tuple[RoundPlan, dict[str, tuple[Identity, dict[int, int]]]]:
        """The round over every selected table, and each read table's identity and log ends (what
        the schedule is told of the planned ones). Every table's log ends come in one call; a table
        settled with these very ends is skipped (:mod:`tiering.enumerator.settled`), and so is one
        its freshness target lets wait (:mod:`tiering.enumerator.schedule`); the others' lake and
        store reads run ``lake.table_parallelism`` at a time (they wait on I/O), in a stable order."""
        from concurrent.futures import ThreadPoolExecutor

        from tiering.enumerator.planner import RoundPlanner

        schedule = self.schedule
        if schedule is not None:
            schedule.trigger(time.monotonic())  # before the log ends are read: a clean time never runs ahead
        owned = self.context.ownership()
        tables = [t for t in self._tables(owned) if self._targets is None or t.name in self._targets]
        logs = self.store.log_ends()
        moved = []
        for info in tables:
            found = logs.get(info.name)
            if found is None or found.table_id != info.table_id:
                continue  # created, dropped or re-created between the two calls: next round
            identity = (info.table_id, None if owned is None else owned.epoch(info.name))
            buckets = self._capped(info.name, found.buckets)
            if self.settled.unchanged(info.name, info.table_id, buckets):
                continue
            if info.name not in self._lake_read and self._reported_settled(info, identity, buckets, found):
                continue
            if schedule is not None and not schedule.due(info.name, identity, self._own_target(info.name)):
                continue
            moved.append((info, identity, buckets))
        with ThreadPoolExecutor(self.context.config.lake.table_parallelism, thread_name_prefix="plan") as pool:
            found_inputs = list(
                pool.map(lambda m: self._table_input(m[0], m[1], m[2], m[0].name in planned_before), moved)
            )
        inputs = [table for table in found_inputs if table is not None]
        unlimited = isinstance(limit, ReadAllAvailable)
        limits = self.context.config.limits
        planner = RoundPlanner(
            max_splits=0 if unlimited else limits.max_splits_per_trigger,
            max_bytes=0 if unlimited else limits.max_bytes_per_trigger,
            fail_on_data_loss=limits.fail_on_data_loss,
        )
        log.debug(
            "round=%d planning %d of %d tables (%d settled)", round_id, len(moved), len(tables), len(self.settled)
        )
        reads = {info.name: (identity, {b: log.end for b, log in logs.items()}) for info, identity, logs in moved}
        return planner.plan(round_id, inputs), reads

    def _own_target(self, table: str) -> float | None:
        """``table``'s own freshness target, the one that schedules it; matched once per process."""
        if table not in self._own_targets:
            self._own_targets[table] = self.context.config.tables.own_freshness_target(table)
        return self._own_targets[table]

    def _caught_up(self, table: str, identity: Identity) -> None:
        """``table``'s lake holds every log end this trigger read: the schedule is told so."""
        if self.schedule is not None:
            self.schedule.caught_up(table, identity)

    def _reported_settled(self, info: StoreTable, identity: Identity, logs: Logs, found: TableLog) -> bool:
        """A table this process has not read yet, settled on the store's word: its last lake
        report (this job's) reached every log end. Reports follow landed commits, so the lake holds
        at least that; a query starting over 10,000 idle tables then opens none of their Delta logs
        (each is read when its log moves, or at its re-check)."""
        from tiering.enumerator.settled import reported_position

        settled = self.settled.record(info.name, info.table_id, logs, reported_position(found, self.context.job))
        if settled:
            self._caught_up(info.name, identity)
        return settled

    def _table_input(self, info: StoreTable, identity: Identity, logs: Logs, planned_before: bool) -> TableInput | None:
        """What the planner needs of one table; None when it is left out of this round: nothing
        to tier (then it is settled), no progress in an availableNow run, its Delta log cannot
        be read (the other tables are planned, this one next round), or, once its lake is read, its
        freshness target lets it wait."""
        self._lake_read.add(info.name)
        try:
            loaded = self.lake.load(info.name)
        except LakeReadError as e:
            log.warning("job=%s table=%s left out of this round: %s", self.context.job, info.name, e)
            return None
        position = loaded.position() if loaded is not None else None
        if self.settled.record(info.name, info.table_id, logs, position):
            self._caught_up(info.name, identity)
            return None
        if self._gave_up(info.name, position, planned_before):
            return None
        schedule = self.schedule
        if schedule is not None and not schedule.after_read(info.name, identity, position, self._own_target(info.name)):
            return None
        from tiering.enumerator.planner import TableInput, needs_bootstrap

        # snapshots serve a bootstrap, or estimate a log record's bytes under a byte limit
        wanted = self.context.config.limits.max_bytes_per_trigger or needs_bootstrap(info, logs.values(), position)
        snapshots = tuple(self.store.latest_snapshots(info.name).values()) if wanted else ()
        return TableInput(info=info, snapshots=snapshots, logs=tuple(logs.values()), lake=position)

    def _capped(self, table: str, logs: Logs) -> Logs:
        """``logs``, in an availableNow run each end cut to the one the run fixed at its start."""
        if self._targets is None:
            return logs
        target = self._targets[table]
        return {bucket: replace(b, end=max(b.start, min(b.end, target.get(bucket, 0)))) for bucket, b in logs.items()}

    def _gave_up(self, table: str, position: LakePosition | None, planned_before: bool) -> bool:
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
        offset = TieringOffset.from_dict(end)
        return [RoundPartition(tuple(to_descriptor(split, offset.round) for split in offset.splits))]

    def commit(self, end: dict) -> None:
        """Nothing to do: it runs one batch late and not for a run's last batch, so it cannot be
        where leases are released (see :mod:`tiering.lease.release`)."""

    def stop(self) -> None:
        """Releases nothing (see :meth:`commit`). Spark stops the planning process by closing its
        socket: the runner's read fails, its error handling writes to the closed socket and dies
        of that, and unless the JVM killed it first (it often has not, on a loaded machine) the
        process prints that stack trace on the driver's stderr, in a clean stop. This is the
        process's last call into the source: from here on a disconnect exits quietly, and any
        other error is printed as before."""
        sys.excepthook = quiet_on_disconnect(sys.excepthook)

    # -- executor side ------------------------------------------------------------------------

    def read(self, partition: InputPartition):
        if not isinstance(partition, RoundPartition):
            raise TypeError(f"kv-tiering source: a partition of another source: {partition!r}")
        yield from partition.rows
