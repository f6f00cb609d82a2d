"""The Spark streaming data source ``kv-tiering``: Spark's glue around the term's planner.

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

The source emits split descriptors (:mod:`tiering.enumerator.descriptor`), not table rows. What
a round plans is the term planner's to say (:mod:`tiering.enumerator.term_planner`: it does no
I/O): the source reads the store and the lake for it, holds the plan's snapshots under the lease,
and asks the term's write authority (:mod:`tiering.coord.write_authority`) which tables it may plan.
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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from tiering.enumerator.descriptor import DESCRIPTOR_SCHEMA, to_descriptor
from tiering.errors import ConfigError, LakeReadError, TableEpochFencedError
from tiering.planning_process import log_to_stderr, quiet_on_disconnect
from tiering.state.offset import LastOffset, TieringOffset

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
    from tiering.coord.write_authority import WriteAuthority
    from tiering.enumerator.planner import RoundPlan, TableInput
    from tiering.enumerator.term_planner import TableToRead, TermPlanner
    from tiering.kvstore.contract import PlanningStore

log = logging.getLogger(__name__)

#: The source's one option: the term context as JSON (:meth:`TermContext.to_option`). It
#: carries the store token, so its key matches Spark's default ``spark.redaction.regex``:
#: plans and query errors print its value as ``*********(redacted)``.
CONTEXT_OPTION = "term_context_secret"


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
        self._planner: TermPlanner | None = None
        self._offsets = LastOffset()  # the last offset seen, as given and decoded

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
            self.store  # noqa: B018  # made with the context: see store
        return self._context

    @property
    def store(self) -> PlanningStore:
        """The term's store behind the seam (:mod:`tiering.kvstore.contract`): what planning reads.
        Made with the context, at the process's first call (query start), its Java client (Fluss's:
        a gateway JVM, started cold) opening on a thread of its own, beside the catalog, log-end and
        lake reads that come before a round's first snapshots."""
        if self._store is None:
            self._store = self.context.planning_store(open_client=True)
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
    def planner(self) -> TermPlanner:
        """What this process's planning remembers from round to round, and its rules
        (:mod:`tiering.enumerator.term_planner`)."""
        if self._planner is None:
            from tiering.enumerator.term_planner import TermPlanner

            self._planner = TermPlanner(self.context.config, self.context.job)
        return self._planner

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
        self.planner.fix_targets(self.store.tables(), self.store.log_ends(), self.context.write_authority())

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        """The next round's offset, or ``start`` when there is nothing to tier. Spark 4.0 and 4.1
        pass neither argument: ``start`` is then the offset Spark logged last, which is what a
        newer Spark passes, the round is capped by ``limits.*`` as a default read limit would cap
        it, and an availableNow run fixes its targets at its first call."""
        if start is None:
            from tiering.state.offset_log import newest_offset

            logged = newest_offset(self.context.checkpoint)
            start = logged.to_dict() if logged is not None else self.initialOffset()
            if self.planner.targets is None and self.context.config.trigger.available_now:
                self.prepareForTriggerAvailableNow()  # the job triggers the rounds itself there
        from tiering.enumerator.term_planner import check_term

        previous = self._offsets.decoded(start)
        check_term(previous, job=self.context.job, epoch=self.context.epoch, lease_id=self.context.lease_id)
        authority = self.context.write_authority()
        plan, read = self._plan(previous.round + 1, limit, {s.table for s in previous.splits}, authority)
        if plan.splits:
            try:
                unavailable = self.lease.acquire(plan.snapshot_refs(), authority.claims(plan.snapshot_tables()))
            except TableEpochFencedError as e:  # the leader's next rebalance gives the table up
                log.warning("round=%d not planned: a table moved to another member of the group: %s", plan.round, e)
                return start
            if unavailable:
                log.warning("round=%d snapshots gone before they could be leased: %s", plan.round, unavailable)
                plan = plan.without_buckets(unavailable)
        if not plan.splits:
            return start
        self.planner.planned(plan, read)
        return self._offsets.encoded(checkpoint(plan, lease_id=self.context.lease_id, epoch=self.context.epoch))

    def _plan(
        self, round_id: int, limit: ReadLimit | None, planned_before: set[str], authority: WriteAuthority
    ) -> tuple[RoundPlan, list[TableToRead]]:
        """The round over every selected table, and the tables whose lake it read (what the
        schedule is told of the planned ones). Every table's log ends come in one call; the planner
        says which tables' lake to read (:meth:`TermPlanner.to_read`), and their lake and store
        reads run ``lake.table_parallelism`` at a time (they wait on I/O), in a stable order."""
        from concurrent.futures import ThreadPoolExecutor

        self.planner.begin()
        tables = self.store.tables()
        to_read = self.planner.to_read(tables, self.store.log_ends(), authority)
        with ThreadPoolExecutor(self.context.config.lake.table_parallelism, thread_name_prefix="plan") as pool:
            found = list(pool.map(lambda t: self._table_input(t, t.name in planned_before), to_read))
        inputs = [table for table in found if table is not None]
        return self.planner.plan(round_id, inputs, read_all=isinstance(limit, ReadAllAvailable)), to_read

    def _table_input(self, table: TableToRead, planned_before: bool) -> TableInput | None:
        """What the planner needs of one table; None when it is left out of this round: its Delta
        log cannot be read (the other tables are planned, this one next round), or the planner
        does not want it (:meth:`TermPlanner.wants`)."""
        try:
            loaded = self.lake.load(table.name)
        except LakeReadError as e:
            log.warning("job=%s table=%s left out of this round: %s", self.context.job, table.name, e)
            return None
        position = loaded.position() if loaded is not None else None
        if not self.planner.wants(table, position, planned_before):
            return None
        wanted = self.planner.needs_snapshots(table, position)
        return table.input(position, self.store.latest_snapshots(table.name).values() if wanted else ())

    def partitions(self, start: dict, end: dict) -> list[RoundPartition]:
        offset = TieringOffset.from_dict(end)
        return [RoundPartition(tuple(to_descriptor(split, offset.round) for split in offset.splits))]

    def commit(self, end: dict) -> None:
        """Nothing to do: it runs one batch late and not for a run's last batch, so it cannot be
        where leases are released (see :mod:`tiering.lease.holds`)."""

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
