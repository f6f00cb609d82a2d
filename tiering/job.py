"""The leader loop and one term's query: lead -> term context -> readStream -> foreachBatch -> lake.

Failure modes:
- the driver dies (SIGKILL): nothing here runs; the next term restarts from the checkpoint,
  reuses the lease id kept there, replays the planned round and trims it to what the lake
  lacks; the lease it held lapses after ``lease.duration_s`` if nobody takes over;
- a newer leader exists: a write is refused where it lands (the store's ``FENCED_EPOCH``, the
  ZooKeeper epoch check, a newer Delta commit) or the watchdog ends the term; the query stops
  and the job raises :class:`LeadershipLostError` without committing anything more;
- a table keeps failing: its buckets are released every round; an availableNow run gives up on
  it after a few rounds and the job reports it (non-zero exit) instead of looping;
- a clean stop: the query is stopped between rounds, then the lease is dropped (Spark does not
  call the source's ``stop()`` on every path, so the driver does it; see
  :mod:`tiering.lease.release`); the query listener is removed once Spark delivered it the
  query's end, so no callback reaches a Python process that is exiting;
- a checkpoint that cannot be used (a file where a directory should be, a log Spark did not
  write, a read-only or full disk): refused when the term is won, before anything is written to
  it (:mod:`tiering.state.checkpoint_check`), and named when the query fails on it mid-run; the
  next start after the fault is fixed resumes from it;
- lake hygiene: the leader maintains the tables after every ``maintenance.every_rounds``-th
  round, in the round loop's thread, so never beside a round commit of its own; the rounds'
  committed tables are handed to the term's maintainer, whose passes skip the tables no round
  changed since its last (:mod:`tiering.lake.maintenance`), so a pass stalls the rounds for the
  tables that need it, not for every table of the job;
  :func:`maintain_as_leader` (`tiering maintain`) runs a pass as a term of its own, refused while
  another driver leads;
- a lake table that no round can repair (deleted or changed by hand, another writer's rows, a
  schema it cannot follow): :func:`resync_as_leader` (`tiering resync`) rebuilds it from the
  store as a term of its own, refused while another driver leads; the next term continues from it.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from tiering import spark_version
from tiering.allocator import ALLOCATOR_ENV
from tiering.conf.model import TieringConfig
from tiering.context import TermContext, planning_store, store_client
from tiering.delta_log.lake import Lake
from tiering.enumerator.splits import SnapshotSplit
from tiering.errors import (
    CheckpointError,
    ConfigError,
    CoordinationError,
    LeadershipLostError,
    NotLeaderError,
    TableNotFoundError,
    TieringError,
    UsageError,
)
from tiering.lake.maintenance import LakeMaintainer, MaintenancePass
from tiering.lease.job_lease import JobLease, LeaseRenewer
from tiering.lease.release import LeaseReleases
from tiering.round.committer import RoundCommitter, other_job
from tiering.round.health import RoundFacts, after_round, read_health, write_health
from tiering.round.outcome import RoundOutcome
from tiering.round.table_states import TableFailure
from tiering.state.offset_log import replayed_offset

if TYPE_CHECKING:
    from tiering.coord.ownership import OwnedTables
    from tiering.coord.rebalancer import GroupRebalancer
    from tiering.kvstore.contract import StoreCatalog
    from tiering.round.resync import TableResync
from tiering.source import ADMISSION_CONTROL, CONTEXT_OPTION, KvTieringDataSource
from tiering.state.checkpoint_check import check_checkpoint
from tiering.state.checkpoint_store import CheckpointStore, checkpoint_of
from tiering.warmup import warm_executors

log = logging.getLogger(__name__)

#: Spark settings the lake writer relies on; the config's [spark] section may add, not undo.
REQUIRED_SPARK_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}

#: The executors' Python workers rewrite the buckets of large rounds with pyarrow: the allocator
#: setting the driver's process takes (:mod:`tiering.allocator`) for them too, unless ``[spark]``
#: sets it.
EXECUTOR_ALLOCATOR_CONF = {f"spark.executorEnv.{name}": value for name, value in ALLOCATOR_ENV.items()}

#: The streaming checkpoint is on the driver's filesystem or S3 (``job.checkpoint``). Spark's default
#: manager for it goes through Hadoop's FileContext, which without Hadoop's native library forks a
#: ``chmod`` and several ``readlink`` processes per file: ~35 ms for each of the two files a round
#: writes (offsets, commits). The FileSystem-based manager writes the same temp-file-then-rename
#: with one fork per file. On a local disk both check that the target is absent, then rename; on
#: S3 (an ``s3a://`` checkpoint) the FileSystem one writes through s3a, which copies on rename.
#: Its package depends on the Spark version (:mod:`tiering.spark_version`).
CHECKPOINT_FILE_MANAGER = (
    "spark.sql.streaming.checkpointFileManagerClass",
    spark_version.checkpoint_file_manager(spark_version.running()),
)

#: Spark keeps a query's last ``numRecentProgressUpdates`` progress events (default 100) for
#: ``recentProgress``, each with the source's start and end offset, and an idle trigger's offsets
#: are the last round's: after a 10,000-table bootstrap, 100 events carrying its splits stayed in
#: the JVM, and every ``recentProgress`` call parses them all in Python. The job reads none of
#: them; a few stay for a person looking at the query. A value set for the session (spark-submit,
#: the config's [spark] section) wins.
PROGRESS_RETENTION = ("spark.sql.streaming.numRecentProgressUpdates", "10")

RoundListener = Callable[[RoundOutcome], None]
T = TypeVar("T")


#: The class Spark's ``s3a`` filesystem is: hadoop-aws's jar (and the AWS SDK bundle it was built
#: against) must be on Spark's classpath for a checkpoint on S3 (deploy/jars/s3a/pom.xml).
S3A_FILESYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"


def use_checkpoint_store(spark, checkpoint: CheckpointStore) -> None:
    """Give the session what Spark needs to write ``checkpoint``: for one on S3, the ``fs.s3a.*``
    settings derived from the lake's storage options (a setting the session already has, as
    ``fs.s3a.x`` or ``spark.hadoop.fs.s3a.x``, wins), after checking that ``s3a`` is on the
    classpath; a :class:`ConfigError` naming the jars otherwise. Nothing for a local one."""
    settings = checkpoint.hadoop_conf()
    if not checkpoint.is_s3:
        return
    jvm = spark.sparkContext._jvm
    try:
        jvm.java.lang.Class.forName(S3A_FILESYSTEM, False, jvm.java.lang.Thread.currentThread().getContextClassLoader())
    except Exception:
        raise ConfigError(
            [
                f"job.checkpoint: {checkpoint.location!r} is on S3, "
                "and Spark writes its part through hadoop-aws's s3a, "
                f"which is not on Spark's classpath ({S3A_FILESYSTEM} "
                "not found): add hadoop-aws of the Hadoop inside "
                "pyspark and its AWS SDK bundle to spark.jars "
                "(scripts/setup_s3a.sh fetches them into deploy/jars/s3a/lib)"
            ]
        ) from None
    for key, value in settings.items():
        if spark.conf.get(key, None) is None and spark.conf.get(f"spark.hadoop.{key}", None) is None:
            spark.conf.set(key, value)


def build_spark(config: TieringConfig):
    """The SparkSession for ``config``: spark-submit's settings win, plain `python` gets local[*]."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(f"kv-tiering:{config.job.name}")
    if "PYSPARK_GATEWAY_PORT" not in os.environ and "spark.master" not in config.spark:
        builder = builder.master("local[*]")
    for key, value in {**EXECUTOR_ALLOCATOR_CONF, **config.spark, **REQUIRED_SPARK_CONF}.items():
        builder = builder.config(key, value)
    return _keeping_sigint(builder.getOrCreate)


def _keeping_sigint(start: Callable[[], T]) -> T:
    """``start()`` with the process's SIGINT handler kept. pyspark's SparkContext sets its own in
    the main thread: it cancels every job and raises ``KeyboardInterrupt`` wherever the thread is,
    mostly inside a py4j call, which logs it with its traceback; `tiering run`'s handler stops the
    job between rounds instead, as on SIGTERM."""
    if threading.current_thread() is not threading.main_thread():
        return start()
    previous = signal.getsignal(signal.SIGINT)
    try:
        return start()
    finally:
        signal.signal(signal.SIGINT, previous)


@dataclass
class JobResult:
    """How a run ended: rounds committed and the tables whose last round failed."""

    rounds: int = 0
    failed_tables: dict[str, TableFailure] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed_tables


class TieringJob:
    """One leadership term's query. ``fence`` raises :class:`NotLeaderError` once this driver
    no longer leads; ``lease`` and ``store`` (the catalog the maintainer's passes list the tables
    from) default to the context's."""

    def __init__(
        self,
        spark,
        context: TermContext,
        *,
        lease: JobLease | None = None,
        store: StoreCatalog | None = None,
        fence: Callable[[], None] = lambda: None,
        on_round: RoundListener = lambda outcome: None,
    ) -> None:
        self.spark = spark
        self.context = context
        self.lease = lease or context.job_lease(context.planning_store())
        self._store = store
        self.result = JobResult()
        self._releases = LeaseReleases(self.lease)
        self._fence = fence
        self._on_round = on_round
        self._renewer: LeaseRenewer | None = None
        maintenance = context.config.maintenance
        self._maintainer = (
            LakeMaintainer(
                context.lake,
                context.job,
                maintenance,
                context.epoch,
                fence=self._check,
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
        from tiering.lake.writers import make_round_writer

        config = self.context.config
        if config.lake.writer == "delta-rs":  # its executors write with Python; delta-spark's in the JVM
            warm_executors(self.spark)  # beside the query's start, which leaves the executors idle
        self.spark.conf.set(*CHECKPOINT_FILE_MANAGER)
        use_checkpoint_store(self.spark, self._checkpoint)
        if self.spark.conf.get(PROGRESS_RETENTION[0], None) is None:
            self.spark.conf.set(*PROGRESS_RETENTION)
        self.spark.dataSource.register(KvTieringDataSource)
        self._take_over_lease()
        committer = RoundCommitter(
            make_round_writer(self.spark, config.lake, self.context.lake_writer, self.context.lake),
            self.context,
            self.context.planning_store(),
            self._releases,
            fence=self._check,
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
        """Stop the query between rounds and stop renewing; drop the lease if still the leader."""
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
            return
        log.info("job=%s epoch=%d stopped; lease %s dropped", job, epoch, lease_id)

    def _check(self) -> None:
        self._fence()
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
    def store(self) -> StoreCatalog:
        """The store's catalog, made when first needed (a term without maintenance never lists)."""
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


def included_tables(config: TieringConfig, store: StoreCatalog) -> list[str]:
    """The store's tables the job tiers (``[tables]``), by name."""
    return sorted(t.name for t in store.tables() if config.tables.selects(t.name))


def log_size_classes(store: StoreCatalog, tables: list[str]) -> dict[str, int]:
    """Each table's weight in its group's balance (coord/assignment.py): the size class of its log
    in the store, the bit length of the changes it ever took (2**20 changes weigh 21, none 1), from
    one store call. A log's end only grows, so the class changes at powers of two and members
    reading it a moment apart agree; a lag, back near 0 after each commit, would have them hand
    tables back and forth."""
    ends = {name: sum(b.end for b in found.buckets.values()) for name, found in store.log_ends(tables).items()}
    return {name: max(1, end.bit_length()) for name, end in ends.items()}


def _lead(
    config: TieringConfig, *, cancel: threading.Event | None = None, timeout_s: float | None = None, role: str = "run"
):
    """This process's term of ``config``'s job (see ``acquire_leadership``)."""
    from tiering.coord.leader import acquire_leadership

    zk = config.zookeeper
    auth = (zk.auth_user, zk.auth_password.get_secret_value()) if zk.auth_user and zk.auth_password else None
    owner = {"host": socket.gethostname(), "pid": os.getpid(), "role": role}
    return acquire_leadership(
        zk.hosts, config.job.name, zk.session_timeout_s, owner=owner, auth=auth, cancel=cancel, timeout_s=timeout_s
    )


def maintain_as_leader(config: TieringConfig, *, wait_s: float = 5.0) -> MaintenancePass:
    """One maintenance pass over the job's tables as a term of its own: a larger epoch than any
    before, so its commits fence every earlier term. Refused (:class:`TieringError`) while another
    driver leads the job: that leader maintains the tables itself, and two terms never act at once."""
    _outside_a_group(config, "maintain")
    busy = (
        f"its leader maintains the lake every {config.maintenance.every_rounds} rounds; "
        "stop it to run `tiering maintain` by hand"
    )
    term = _term_of_its_own(config, "maintain", busy, wait_s)
    try:
        tables = included_tables(config, planning_store(config))
        # a maintainer of its own knows no history: its pass covers every table
        return LakeMaintainer(
            Lake.of(config.lake),
            config.job.name,
            config.maintenance,
            term.epoch,
            fence=term.check,
            parallelism=config.lake.table_parallelism,
        ).run(tables)
    finally:
        term.resign()


def _outside_a_group(config: TieringConfig, command: str) -> None:
    """A term of its own commits under the job's name and epoch, which a tiering group's table
    epochs do not order: refused in a group (UsageError naming it)."""
    if config.job.group is not None:
        raise UsageError(
            f"`tiering {command}` of job {config.job.name!r}: the job is in tiering group {config.job.group!r}, whose "
            "lake commits are ordered by table epochs, not by the job's epoch; not available in a group yet"
        )


def resync_as_leader(config: TieringConfig, table: str, *, wait_s: float = 5.0) -> TableResync:
    """Rebuild ``table``'s lake copy from a fresh snapshot of every bucket, in one commit of a
    term of its own (:mod:`tiering.round.resync`); the job's next term continues from it. A table
    the store does not have or the job does not tier is a :class:`UsageError`, one another job
    tiers (its lake report is that job's) a ``ConflictError`` naming it, a driver leading the
    job a :class:`TieringError`: all before anything is written."""
    from tiering.kvstore.reference import ReferenceStore, store_table
    from tiering.lake.writers import make_round_writer
    from tiering.round.resync import resync_table
    from tiering.state.lease_file import new_lease_id

    _outside_a_group(config, "resync")
    job = config.job.name
    if not config.tables.selects(table):
        raise UsageError(f"job {job!r} does not tier table {table!r} ([tables] include/exclude): nothing to resync")
    client = store_client(config.kvstore)
    try:
        info = client.get_table(table)
    except TableNotFoundError as e:
        raise UsageError(f"table {table!r} is not in the store at {config.kvstore.url}: nothing to resync") from e
    holder = client.lake_holders([table]).get(table)
    if holder not in (None, job):
        raise other_job(table, job, holder)
    term = _term_of_its_own(config, "resync", "stop it to run `tiering resync`, then start it again", wait_s)
    try:
        lease = JobLease(ReferenceStore(client), new_lease_id(job), term.epoch, int(config.lease.duration_s * 1000))
        lease.claim()
        renewer = LeaseRenewer(lease)

        def fence() -> None:
            term.check()
            renewer.check()

        try:
            writer = make_round_writer(build_spark(config), config.lake, job)
            with renewer:  # the snapshots stay held however long the rebuild takes
                return resync_table(store_table(info), writer, Lake.of(config.lake), client, lease, fence=fence)
        finally:
            _drop_quietly(lease)
    finally:
        term.resign()


def _drop_quietly(lease: JobLease) -> None:
    """Drop a one-off command's lease; one the store refuses lapses after its duration (the
    command's own error, if any, is the one that matters)."""
    try:
        lease.drop()
    except TieringError as e:
        log.warning("lease %s not dropped (it lapses after %d ms): %s", lease.lease_id, lease.duration_ms, e)


def _term_of_its_own(config: TieringConfig, command: str, busy: str, wait_s: float):
    """A term for a one-off command (`tiering maintain`, `tiering resync`): a larger epoch than
    any before, so its commits fence every earlier term. Refused (:class:`TieringError`) while a
    driver leads the job (``busy`` says what to do), or when one takes the lead first."""
    from tiering.coord.leader import read_status

    Lake.of(config.lake).store.check()
    job = config.job.name
    leader = read_status(config.zookeeper.hosts, job).leader
    if leader is not None:
        raise TieringError(f"job {job!r} is led by {leader} right now: {busy}")
    try:
        return _lead(config, timeout_s=wait_s, role=command)
    except CoordinationError as e:
        raise TieringError(f"job {job!r}: `tiering {command}` refused, another driver took the lead: {e}") from e


def run_as_leader(
    config: TieringConfig,
    *,
    stop: threading.Event | None = None,
    listeners: Sequence[RoundListener] = (),
    ask_store_first: bool = False,
) -> JobResult:
    """Wait to lead the job, run its query for the term, then give leadership back.

    A standby waits inside ``acquire_leadership``; ``stop`` set while it waits ends the wait
    (an empty result: it never led). Losing the term stops the query and raises
    :class:`LeadershipLostError` (the caller exits non-zero: another driver now owns the job,
    or ZooKeeper was out of reach longer than the session timeout and a supervisor restarts it).
    ``listeners`` get every round's outcome after the job's own observer (the demo's view).
    A lake root that cannot be used is refused before anything else, a checkpoint that cannot be
    used (:mod:`tiering.state.checkpoint_check`) as soon as the term is won: nothing is written.
    ``ask_store_first`` (`tiering run`): then the store is asked for the tables the job selects
    (:func:`tiering.preflight.before_run`: an availableNow run over none, or with the store out
    of reach, is refused before it leads).
    """
    from tiering import observability, preflight

    Lake.of(config.lake).store.check()  # a bad lake root fails here, before the job leads or writes
    if ask_store_first:
        preflight.before_run(config)
    log.info("job=%s waiting for leadership at %s", config.job.name, config.zookeeper.hosts)
    try:
        term = _lead(config, cancel=stop)
    except CoordinationError:
        if stop is not None and stop.is_set():
            log.info("job=%s stopped while waiting for leadership", config.job.name)
            return JobResult()
        raise
    log.info("job=%s leader with epoch=%d", config.job.name, term.epoch)
    group: GroupRebalancer | None = None
    try:
        check_checkpoint(checkpoint_of(config), config.job.name)  # before the term writes to it
        context = TermContext.begin(config, term.epoch)
        if config.job.group is not None:
            group = _group_member(config, config.job.group, term, context.planning_store())
            context = context.model_copy(update={"group_file": str(group.path)})
            if config.trigger.available_now:  # its rounds end at the first with nothing owned: join first
                group.start()
        spark = build_spark(config)
        lease = context.job_lease(context.planning_store())
        observer = observability.RoundObserver(context, lease, listeners=listeners)
        progress = observability.ProgressListener(context.job)
        spark.streams.addListener(progress)
        job = TieringJob(spark, context, lease=lease, fence=term.check, on_round=observer)
        try:
            # A continuous member joins once its query has started, not before the driver's JVM
            # and query start: tables it took then would wait that long for a round.
            join = group.start if group is not None and not group.started else None
            result = job.run(stop, lost=term.lost, on_started=join)
        except Exception as e:
            # A query failing because the term ended (a fence raised, the store said
            # FENCED_EPOCH) is a leadership loss, whatever wrapper Spark put around it.
            reason = _lost_reason(term, e)
            if reason is None:
                raise
            raise LeadershipLostError(
                f"job {config.job.name!r}: leadership lost ({reason}); query stopped, lease left to the new leader",
                epoch=term.epoch,
            ) from e
        finally:
            progress.detach(spark)  # before the process may exit: Spark still delivers the query's end to it
        if term.lost.is_set():
            raise LeadershipLostError(
                f"job {config.job.name!r}: leadership lost ({term.lost_reason}); stopped without dropping the lease",
                epoch=term.epoch,
            )
        return result
    finally:
        if group is not None:
            group.stop()
        term.resign()


def _group_member(config: TieringConfig, group: str, term, store: StoreCatalog) -> GroupRebalancer:
    """This term's member of tiering group ``group``, not joined yet (:meth:`GroupRebalancer.start`
    joins); ConfigError now when its ``[tables]`` selection is not the group's."""
    from tiering.coord.group import GroupMember
    from tiering.coord.rebalancer import GroupRebalancer
    from tiering.coord.start_grace import StartGrace

    member = GroupMember(term.zk, group, config.job.name, term.fence, config.tables)
    member.check_selection()
    every_s = max(config.trigger.interval_s, 1.0)
    grace = StartGrace.of_session(term.session_timeout_s)  # the server's, which peers' sessions expire by
    return GroupRebalancer(
        member,
        lambda: included_tables(config, store),
        every_s,
        grace,
        weights=lambda tables: log_size_classes(store, tables),
    )


def _lost_reason(term, error: Exception) -> str | None:
    """Why ``term`` is over, or None while it still holds (asks ZooKeeper if need be). A term
    whose fence refused a write is over even when ZooKeeper, asked again, would confirm it (it
    could not be asked then, and the round that asked was aborted)."""
    if isinstance(error, NotLeaderError):
        return str(error)
    if term.lost.is_set():
        return term.lost_reason
    if term.refusal is not None:
        return term.refusal
    try:
        term.check()
    except LeadershipLostError as e:
        return str(e)
    return None
