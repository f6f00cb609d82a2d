"""One leadership term's query: term context -> readStream -> foreachBatch -> lake.

Failure modes:
- a newer leader exists: a write is refused where it lands (the store's ``FENCED_EPOCH``, the
  ZooKeeper epoch check, a newer Delta commit) or the watchdog ends the term; the query stops
  without committing anything more (the leader loop, :mod:`tiering.job.leader`, says why);
- a table keeps failing: its buckets are released every round; an availableNow run gives up on
  it after a few rounds and the job reports it (:class:`JobResult`, non-zero exit) instead of
  looping;
- a clean stop: the query is stopped between rounds, then the lease is dropped (Spark does not
  call the source's ``stop()`` on every path, so the driver does it; see
  :mod:`tiering.lease.holds`);
- the driver killed between the planner's acquire and Spark's offset log: the next term claims
  the kept lease and lets go of every hold no replayed round needs; a checkpoint whose replayed
  round cannot be read keeps them all (expiry lets go of them);
- a query that failed on its checkpoint (a disk that filled up or turned read-only): named by
  running the pre-flight check again (:mod:`tiering.state.checkpoint_check`);
- lake hygiene: the term maintains the tables after every ``maintenance.every_rounds``-th round,
  in the round loop's thread, so never beside a round commit of its own; the rounds' committed
  tables are handed to the term's maintainer, whose passes skip the tables no round changed
  since its last (:mod:`tiering.writers.maintenance`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tiering.context import TermContext
from tiering.enumerator.splits import SnapshotSplit
from tiering.errors import CheckpointError, NotLeaderError, TieringError
from tiering.job.spark_session import CHECKPOINT_FILE_MANAGER, PROGRESS_RETENTION, use_checkpoint_store
from tiering.job.tables import included_tables
from tiering.lease.holds import SnapshotHolds
from tiering.lease.job_lease import JobLease, LeaseRenewer
from tiering.round.committer import RoundCommitter
from tiering.round.health import RoundFacts, after_round, read_health, write_health
from tiering.round.outcome import RoundOutcome
from tiering.round.table_states import TableFailure
from tiering.source import ADMISSION_CONTROL, CONTEXT_OPTION, KvTieringDataSource
from tiering.state.checkpoint_check import check_checkpoint
from tiering.state.offset_log import replayed_offset
from tiering.warmup import Prepare, warm_executors
from tiering.writers.maintenance import LakeMaintainer

if TYPE_CHECKING:
    from tiering.coord.ownership import OwnedTables
    from tiering.kvstore.contract import PlanningStore

__all__ = ["JobResult", "RoundListener", "TieringJob"]

log = logging.getLogger(__name__)

RoundListener = Callable[[RoundOutcome], None]


@dataclass
class JobResult:
    """How a run ended: rounds committed and the tables whose last round failed."""

    rounds: int = 0
    failed_tables: dict[str, TableFailure] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed_tables


class TieringJob:
    """One leadership term's query. ``check_term`` raises :class:`NotLeaderError` once this
    driver no longer leads (the term check: :meth:`LeaderTerm.check`); ``lease`` and ``store``
    (the catalog the maintainer's passes list the tables from) default to the context's (the
    lease's store opening its Java client at once: see :meth:`TermContext.planning_store`)."""

    def __init__(
        self,
        spark,
        context: TermContext,
        *,
        lease: JobLease | None = None,
        store: PlanningStore | None = None,
        check_term: Callable[[], None] = lambda: None,
        on_round: RoundListener = lambda outcome: None,
    ) -> None:
        self.spark = spark
        self.context = context
        self.lease = lease or context.job_lease(context.planning_store(open_client=True))
        self._store = store
        self.result = JobResult()
        self._releases = SnapshotHolds(self.lease)
        self._check_term = check_term
        self._on_round = on_round
        self._renewer: LeaseRenewer | None = None
        maintenance = context.config.maintenance
        self._maintainer = (
            LakeMaintainer(
                context.lake,
                context.job,
                maintenance,
                context.epoch,
                check_term=self._check,
                parallelism=context.config.lake.table_parallelism,
            )
            if maintenance.enabled and context.config.job.group is None
            else None
        )
        if maintenance.enabled and context.config.job.group is not None:
            log.warning(
                "job=%s: no lake maintenance between rounds in tiering group %s: its passes are not fenced by "
                "table epochs yet",
                context.job,
                context.config.job.group,
            )
        self._query = None
        self._end_when_idle = False
        self._lock = threading.Lock()
        self._checkpoint = context.checkpoint
        self._health = read_health(self._checkpoint)

    def start(self):
        """Start the streaming query (and the lease renewer); returns Spark's StreamingQuery."""
        from tiering.writers.choice import make_round_writer

        config = self.context.config
        if config.lake.writer == "delta-rs":  # its executors write with Python; delta-spark's in the JVM
            warm_executors(self.spark, self._reader_warm_up())  # beside the query's start: executors idle
        self.spark.conf.set(*CHECKPOINT_FILE_MANAGER)
        use_checkpoint_store(self.spark, self._checkpoint)
        if self.spark.conf.get(PROGRESS_RETENTION[0], None) is None:
            self.spark.conf.set(*PROGRESS_RETENTION)
        self.spark.dataSource.register(KvTieringDataSource)
        self._take_over_lease()
        committer = RoundCommitter(
            make_round_writer(self.spark, config.lake, self.context.writer_id, self.context.lake),
            self.context,
            self.store,
            self._releases,
            check_term=self._check,
            on_round=self._round_done,
        )
        stream = (
            self.spark.readStream.format(KvTieringDataSource.name())
            .option(CONTEXT_OPTION, self.context.to_option())
            .load()
        )
        # Spark 4.0/4.1 run a Python source's availableNow as one round: there the rounds are
        # triggered back to back and the query ends at the first with nothing to tier (run()), as
        # availableNow ends on a newer Spark (tiering.spark_version).
        self._end_when_idle = config.trigger.available_now and not ADMISSION_CONTROL
        if self._end_when_idle:
            trigger = {"processingTime": "0 seconds"}
        elif config.trigger.available_now:
            trigger = {"availableNow": True}
        else:
            trigger = {"processingTime": f"{config.trigger.interval_s} seconds"}
        if config.lease.renew and self.lease.enabled:
            self._renewer = LeaseRenewer(self.lease, after=self._releases.after_renewal).start()
        self._query = (
            stream.writeStream.queryName(f"kv-tiering:{self.context.job}")
            .foreachBatch(committer)
            .option("checkpointLocation", self._checkpoint.spark_location)
            .trigger(**trigger)
            .start()
        )
        log.info(
            "job=%s epoch=%d lease=%s query started (%s)",
            self.context.job,
            self.context.epoch,
            self.lease.lease_id,
            "availableNow" if config.trigger.available_now else f"every {config.trigger.interval_s}s",
        )
        return self._query

    def _reader_warm_up(self) -> Prepare | None:
        """What a Fluss job's warmed Python workers also start: the bucket reader's gateway JVM,
        the one the round's tasks there find (a reader unpickled is the worker's reader of the
        database); None for a store whose reader keeps nothing per worker."""
        if self.context.config.kvstore.kind != "fluss":
            return None
        from tiering.fluss.store import FlussBucketReader

        reader = self.store.bucket_reader()
        return reader.warm if isinstance(reader, FlussBucketReader) else None

    def _take_over_lease(self) -> None:
        """The kept lease at the term's start: claimed with this term's epoch (off when the store
        has no lease API, for the planning process too), then rid of the holds no planned round
        needs. A checkpoint whose replayed round cannot be read keeps every hold: expiry, not a
        guess, lets go of them."""
        self.lease.claim()
        if not self.lease.enabled:
            self.context = self.context.model_copy(update={"leases": False})
            return
        try:
            replayed = replayed_offset(self._checkpoint)
        except CheckpointError as e:
            log.warning(
                "job=%s: the lease's holds are kept, the round to replay is unreadable: %s", self.context.job, e
            )
            return
        planned = [s.ref for s in replayed.splits if isinstance(s, SnapshotSplit)] if replayed is not None else []
        try:
            self._releases.reconcile(planned, self.store)
        except NotLeaderError:
            raise
        except TieringError as e:
            log.warning("job=%s: the lease's unplanned holds are kept (they lapse with it): %s", self.context.job, e)

    @property
    def query(self):
        """Spark's StreamingQuery of this term (None before :meth:`start`)."""
        return self._query

    def run(
        self,
        stop: threading.Event | None = None,
        *,
        lost: threading.Event | None = None,
        poll_s: float = 0.5,
        on_started: Callable[[], object] | None = None,
    ) -> JobResult:
        """Run until the query ends (availableNow), ``stop`` is set (a clean stop) or ``lost`` is
        (the term ended); always stops the query. Spark's ``awaitTermination`` blocks in the JVM,
        so the events are looked at between waits of ``poll_s``. ``on_started`` is called in this
        thread once the query has started (an error it raises stops the query and is raised)."""
        from pyspark.errors import StreamingQueryException

        until = [event for event in (stop, lost) if event is not None]
        query = self.start()
        try:
            try:
                if on_started is not None:
                    on_started()
                while query.isActive and not any(event.is_set() for event in until):
                    query.awaitTermination(poll_s)
                    if self._end_when_idle and query.status["message"] == "Waiting for data to arrive":
                        break  # a trigger found nothing to tier: availableNow is done (stopped below)
                if stop is not None and stop.is_set() and not (lost is not None and lost.is_set()):
                    _let_trigger_end(query, self.context.config.trigger.stop_wait_s)
            except StreamingQueryException as e:  # the query failed while we waited
                self._check_checkpoint_after(e)
                raise TieringError(f"job {self.context.job!r}: query failed: {e}", epoch=self.context.epoch) from e
            error = query.exception()
            if error is not None:
                self._check_checkpoint_after(error)
                raise TieringError(f"job {self.context.job!r}: query failed: {error}", epoch=self.context.epoch)
        finally:
            self.stop()
        return self.result

    def _check_checkpoint_after(self, error: Exception) -> None:
        """A query that failed on its checkpoint (a disk that filled up or turned read-only) says
        so in a Java stack trace naming no file; the pre-flight check, run again, names it."""
        try:
            check_checkpoint(self._checkpoint)
        except CheckpointError as bad:
            raise CheckpointError(f"job {self.context.job!r}: query failed on its checkpoint: {bad}") from error

    def stop(self) -> None:
        """Stop the query between rounds and stop renewing; drop the lease if still the leader;
        then close the stores the term made (:meth:`TermContext.close`)."""
        if self._query is not None and self._query.isActive:
            self._query.stop()
        if self._renewer is not None:
            self._renewer.stop()
        job, epoch, lease_id = self.context.job, self.context.epoch, self.lease.lease_id
        try:
            self._check()
            self._releases.stopped()
        except TieringError as e:
            log.warning("job=%s epoch=%d stopped without dropping lease %s: %s", job, epoch, lease_id, e)
        else:
            log.info("job=%s epoch=%d stopped; lease %s dropped", job, epoch, lease_id)
        finally:
            self.context.close()

    def _check(self) -> None:
        """The term check, and the lease renewer's end (a fenced epoch) handed to this thread."""
        self._check_term()
        if self._renewer is not None:
            self._renewer.check()

    def _round_done(self, outcome: RoundOutcome) -> None:
        owned = self.context.ownership()
        with self._lock:
            self.result.rounds += 1
            for table in outcome.committed:
                self.result.failed_tables.pop(table, None)
            for table, failure in outcome.failed.items():
                if failure.handed_over(owned is not None and owned.epoch(table) is not None):
                    self.result.failed_tables.pop(table, None)  # another member of the group tiers it now
                else:
                    self.result.failed_tables[table] = failure
        self._record_health(outcome, owned)
        self._on_round(outcome)
        if self._maintainer is not None:
            self._maintain(self._maintainer, outcome)

    @property
    def store(self) -> PlanningStore:
        """The term's store for its rounds, made when first needed: the lease's take-over, the
        committer and the maintenance passes share it (they run one after another, on the query's
        thread); the lease keeps its own, for its renewer."""
        if self._store is None:
            self._store = self.context.planning_store()
        return self._store

    def _maintain(self, maintainer: LakeMaintainer, outcome: RoundOutcome) -> None:
        """Hand the round's commits to the maintainer (a replayed or empty round committed
        nothing), and run a pass after every ``every_rounds``-th round."""
        maintainer.changed(table for table, commit in outcome.committed.items() if not commit.skipped)
        if outcome.round_id % self.context.config.maintenance.every_rounds == 0:
            maintainer.run(included_tables(self.context.config, self.store))

    def _record_health(self, outcome: RoundOutcome, owned: OwnedTables | None) -> None:
        """Keep every table's health in the checkpoint for ``tiering status`` (advisory: a write
        that fails is logged, never fails the round, which has landed); ``owned``: in a group, what
        this member owns after the round."""
        committed = {t: (c.table_id, c.delta_version) for t, c in outcome.committed.items() if c.delta_version >= 0}
        failed = {t: (outcome.table_ids[t], failure) for t, failure in outcome.failed.items()}
        facts = RoundFacts(
            int(time.time() * 1000),
            committed,
            failed,
            frozenset(outcome.dropped),
            None if owned is None else frozenset(owned.tables),
        )
        self._health = after_round(self._health, facts)
        outcome.health = self._health
        try:
            write_health(self._checkpoint, self._health)
        except OSError as e:
            log.warning("job=%s round=%d: table health not saved: %s", self.context.job, outcome.round_id, e)


def _let_trigger_end(query, wait_s: float, poll_s: float = 0.05) -> None:
    """Spark's ``stop`` interrupts the stream thread wherever it is: mid-round, or writing the
    round's commit to the checkpoint, where Hadoop prints the interrupt's stack trace. A clean
    stop lets the running trigger end first, so the query stops between rounds; a second
    signal (``KeyboardInterrupt``) or ``wait_s`` (``trigger.stop_wait_s``) stops it at once."""
    deadline = time.monotonic() + wait_s
    if query.isActive and query.status["isTriggerActive"]:
        log.info("waiting up to %.0fs for the running round to end", wait_s)
    while query.isActive and query.status["isTriggerActive"] and time.monotonic() < deadline:
        time.sleep(poll_s)
