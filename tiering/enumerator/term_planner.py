"""What a term's planning remembers from round to round, and the rules that decide which tables a
round reads and plans (docs/DESIGN.md §5); Spark-free and I/O-free: the source reads the store and
the lake and hands this planner what it read.

Failure modes it is built around:
- a round's planning cost growing with the tables the job tiers, not with those that changed: a
  table caught up with log ends that have not moved is skipped unread (:mod:`.settled`), a table
  this process has not read yet is settled on the store's word (its last lake report, this
  job's), and each name is matched against the selection once per process;
- a table planned more often than its freshness target asks (:mod:`.schedule`): a continuous run
  with targets of its own plans a changed table when its target comes due;
- an availableNow run that never ends: the log ends are fixed when it starts (a table's later
  writes wait for the next run), and a table whose lake position does not move in
  :data:`AVAILABLE_NOW_MAX_ATTEMPTS` consecutive rounds (its writes keep failing) is given up on;
- in a tiering group, a table planned by a member that does not own it: only the tables the
  term's write authority (:mod:`tiering.coord.write_authority`) gives it are planned, and a
  table's identity for the schedule carries its table epoch, so a table given back is scheduled
  afresh.

A round goes: :meth:`TermPlanner.begin`; :meth:`TermPlanner.to_read` (the tables whose lake the
round reads, from the store's listing and log ends); :meth:`TermPlanner.wants` for each with its
lake position (and :meth:`TermPlanner.needs_snapshots`); :meth:`TermPlanner.plan` over what was
read; then, once the plan's snapshots are held, :meth:`TermPlanner.planned`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tiering.enumerator.planner import RoundPlan, RoundPlanner, TableInput, needs_bootstrap
from tiering.enumerator.schedule import FreshnessSchedule, Identity
from tiering.enumerator.settled import Logs, SettledTables, reported_position
from tiering.errors import FencedEpochError

if TYPE_CHECKING:
    from tiering.conf.model import TieringConfig
    from tiering.coord.write_authority import WriteAuthority
    from tiering.enumerator.positions import LakePosition
    from tiering.kvstore.contract import SnapshotRef, StoreTable, TableLog
    from tiering.state.offset import TieringOffset

__all__ = ["AVAILABLE_NOW_MAX_ATTEMPTS", "TableToRead", "TermPlanner", "check_term"]

log = logging.getLogger(__name__)

#: Consecutive rounds an availableNow run re-plans a table whose lake position does not move
#: (its writes keep failing) before it gives up on that table, so the run can end.
AVAILABLE_NOW_MAX_ATTEMPTS = 3


def check_term(previous: TieringOffset, *, job: str, epoch: int, lease_id: str) -> None:
    """The checkpoint's last offset says which term planned it and under which lease: a newer
    epoch there means this process plans for a term that is over (:class:`FencedEpochError`);
    another lease id means the checkpoint's lease file was replaced, and that lease's holds lapse
    on their own."""
    if previous.epoch > epoch:
        raise FencedEpochError(
            f"job {job!r}: the checkpoint's last round was planned by epoch {previous.epoch}, this term is epoch "
            f"{epoch}; a newer leader exists",
            epoch=epoch,
        )
    if previous.lease_id not in (None, lease_id):
        log.warning(
            "job=%s: the checkpoint's offsets name lease %s, this term uses %s; the old lease lapses after "
            "lease.duration_s",
            job,
            previous.lease_id,
            lease_id,
        )


@dataclass(frozen=True)
class TableToRead:
    """A selected table whose lake a round reads: its log moved since it was last found caught
    up, or it is due a re-check. ``logs``: its log ends by bucket (in an availableNow run cut to the
    ones fixed at its start); ``identity``: its id and, in a group, its table epoch."""

    info: StoreTable
    identity: Identity
    logs: Logs

    @property
    def name(self) -> str:
        return self.info.name

    def input(self, lake: LakePosition | None, snapshots: Iterable[SnapshotRef]) -> TableInput:
        """What the round planner needs of the table, its lake read (and its snapshots, if asked)."""
        return TableInput(info=self.info, snapshots=tuple(snapshots), logs=tuple(self.logs.values()), lake=lake)


class TermPlanner:
    """One term's planning memory (one per planning process): settled tables, the freshness
    schedule, an availableNow run's targets and stalls, and which names the selection takes."""

    def __init__(self, config: TieringConfig, job: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._config = config
        self._job = job
        self._clock = clock
        self.settled = SettledTables(clock)
        self._schedule = FreshnessSchedule(config.trigger.interval_s) if config.tables.freshness_targets else None
        self._selected: dict[str, bool] = {}
        self._own_targets: dict[str, float | None] = {}
        self._lake_read: set[str] = set()  # tables whose lake this process read at least once
        #: an availableNow run's log ends to reach, fixed at its start; None in a continuous run
        self.targets: dict[str, dict[int, int]] | None = None
        self._stalled: dict[str, tuple[tuple, int]] = {}

    @property
    def schedule(self) -> FreshnessSchedule | None:
        """Which changed tables a round plans; None, every changed table planned, when no table
        has a target of its own, and in an availableNow run: it tiers everything there is, then ends."""
        if self.targets is not None or self._config.trigger.available_now:
            return None
        return self._schedule

    def begin(self) -> None:
        """A round starts: the schedule takes its time, before the store's log ends are read (a
        clean time never runs ahead)."""
        if self.schedule is not None:
            self.schedule.trigger(self._clock())

    def selected(self, tables: Iterable[StoreTable], authority: WriteAuthority) -> list[StoreTable]:
        """The tables of ``tables`` the config selects and the term may write (in a group, those
        the leader took for this member: a table newly owned is planned from the lake's positions,
        as in a new term)."""
        chosen = []
        for t in tables:
            selected = self._selected.get(t.name)
            if selected is None:
                selected = self._selected[t.name] = self._config.tables.selects(t.name)
            if selected and authority.may_write(t.name):
                chosen.append(t)
        return chosen

    def fix_targets(
        self, tables: Iterable[StoreTable], log_ends: Mapping[str, TableLog], authority: WriteAuthority
    ) -> None:
        """Start an availableNow run: the selected tables' log ends now are where it ends."""
        chosen = {t.name for t in self.selected(tables, authority)}
        self.targets = {
            name: {bucket: b.end for bucket, b in logs.buckets.items()}
            for name, logs in log_ends.items()
            if name in chosen
        }
        log.info("availableNow: tiering %d tables up to their current log ends", len(self.targets))

    def to_read(
        self, tables: Iterable[StoreTable], log_ends: Mapping[str, TableLog], authority: WriteAuthority
    ) -> list[TableToRead]:
        """The round's tables whose lake is read: selected (and in an availableNow run, targeted),
        listed with the same id in ``log_ends``, neither settled with these very ends nor settled
        on the store's word, and not let wait by their freshness target (the round's time taken
        by :meth:`begin`)."""
        schedule = self.schedule
        chosen = [t for t in self.selected(tables, authority) if self.targets is None or t.name in self.targets]
        found = []
        for info in chosen:
            logs = log_ends.get(info.name)
            if logs is None or logs.table_id != info.table_id:
                continue  # created, dropped or re-created between the two calls: next round
            table = TableToRead(info, (info.table_id, authority.table_epoch(info.name)), self._capped(info.name, logs))
            if self.settled.unchanged(info.name, info.table_id, table.logs):
                continue
            if info.name not in self._lake_read and self._reported_settled(table, logs):
                continue
            if schedule is not None and not schedule.due(info.name, table.identity, self._own_target(info.name)):
                continue
            found.append(table)
        self._lake_read.update(t.name for t in found)
        log.debug("planning %d of %d tables (%d settled)", len(found), len(chosen), len(self.settled))
        return found

    def wants(self, table: TableToRead, lake: LakePosition | None, planned_before: bool) -> bool:
        """Whether the round plans ``table``, its lake at ``lake``: not when there is nothing to
        tier (it is settled then), no progress in an availableNow run, or its freshness target
        lets it wait; ``planned_before``: the previous round planned it."""
        if self.settled.record(table.name, table.info.table_id, table.logs, lake):
            self._caught_up(table)
            return False
        if self._gave_up(table.name, lake, planned_before):
            return False
        schedule = self.schedule
        return schedule is None or schedule.after_read(table.name, table.identity, lake, self._own_target(table.name))

    def needs_snapshots(self, table: TableToRead, lake: LakePosition | None) -> bool:
        """Whether the round needs ``table``'s snapshots: a bootstrap, or estimating a log record's
        bytes under a byte limit."""
        return bool(self._config.limits.max_bytes_per_trigger) or needs_bootstrap(table.info, table.logs.values(), lake)

    def plan(self, round_id: int, inputs: Sequence[TableInput], *, read_all: bool) -> RoundPlan:
        """The round over ``inputs``; ``read_all``: Spark asked for everything available, the
        ``limits.*`` caps set aside."""
        limits = self._config.limits
        planner = RoundPlanner(
            max_splits=0 if read_all else limits.max_splits_per_trigger,
            max_bytes=0 if read_all else limits.max_bytes_per_trigger,
            fail_on_data_loss=limits.fail_on_data_loss,
        )
        return planner.plan(round_id, inputs)

    def planned(self, plan: RoundPlan, read: Iterable[TableToRead]) -> None:
        """``plan`` is handed out (its snapshots held): the schedule is told which tables it plans,
        each up to the log ends ``read`` held (or in part: a read limit held a bucket back, or a
        bucket was skipped), and one line says how many tables wait for their freshness targets."""
        for skipped in plan.skipped:
            log.info(
                "round=%d table=%s bucket=%d skipped: %s", plan.round, skipped.table, skipped.bucket, skipped.reason
            )
        schedule = self.schedule
        if schedule is None:
            return
        reads = {t.name: t for t in read}
        partial = {t for t, _ in plan.deferred} | {s.table for s in plan.skipped}
        for table in plan.tables:
            found = reads[table.table]
            ends = {bucket: b.end for bucket, b in found.logs.items()}
            schedule.planned(table.table, found.identity, None if table.table in partial else ends)
        if schedule.held:
            log.info(
                "round=%d plans %d tables; %d tables wait for their freshness targets (first due in %.1f s)",
                plan.round,
                len({s.table for s in plan.splits}),
                len(schedule.held),
                max(0.0, min(schedule.held.values())),
            )

    def _own_target(self, table: str) -> float | None:
        """``table``'s own freshness target, the one that schedules it; matched once per process."""
        if table not in self._own_targets:
            self._own_targets[table] = self._config.tables.own_freshness_target(table)
        return self._own_targets[table]

    def _caught_up(self, table: TableToRead) -> None:
        """``table``'s lake holds every log end this trigger read: the schedule is told so."""
        if self.schedule is not None:
            self.schedule.caught_up(table.name, table.identity)

    def _reported_settled(self, table: TableToRead, found: TableLog) -> bool:
        """A table this process has not read yet, settled on the store's word: its last lake
        report (this job's) reached every log end. Reports follow landed commits, so the lake holds
        at least that; a query starting over 10,000 idle tables then opens none of their Delta logs
        (each is read when its log moves, or at its re-check)."""
        settled = self.settled.record(table.name, table.info.table_id, table.logs, reported_position(found, self._job))
        if settled:
            self._caught_up(table)
        return settled

    def _capped(self, table: str, found: TableLog) -> Logs:
        """``found``'s log ends, in an availableNow run each cut to the one the run fixed at its start."""
        if self.targets is None:
            return found.buckets
        target = self.targets[table]
        return {
            bucket: replace(b, end=max(b.start, min(b.end, target.get(bucket, 0))))
            for bucket, b in found.buckets.items()
        }

    def _gave_up(self, table: str, position: LakePosition | None, planned_before: bool) -> bool:
        """In an availableNow run, stop re-planning a table whose lake position never moves."""
        if self.targets is None:
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
