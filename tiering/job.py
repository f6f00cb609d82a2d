"""Wires one tiering query for one leadership term: readStream -> foreachBatch -> lake.

Failure modes:
- the driver dies (SIGKILL): nothing here runs; the next term restarts from the checkpoint,
  reuses the lease id kept there, replays the planned round and trims it to what the lake
  lacks; the lease it held lapses after ``lease.duration_s`` if nobody takes over;
- a newer leader exists: the store answers ``FENCED_EPOCH`` or the term's ``fence`` raises;
  the query stops with that error and the job exits non-zero without committing anything;
- a table keeps failing: its buckets are released every round; an availableNow run gives up on
  it after a few rounds and the job reports it (non-zero exit) instead of looping;
- a clean stop: the query is stopped between rounds, then the lease is dropped (Spark does not
  call the source's ``stop()`` on every path, so the driver does it).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from tiering.conf.model import TieringConfig
from tiering.errors import TieringError
from tiering.kvstore.client import KvStoreClient
from tiering.lake.committer import RoundCommitter, RoundOutcome
from tiering.lease.job_lease import JobLease, LeaseRenewer
from tiering.source import KvTieringDataSource
from tiering.state.lease_file import load_or_create_lease_id

log = logging.getLogger(__name__)

#: Spark settings the lake writer relies on; the config's [spark] section may add, not undo.
REQUIRED_SPARK_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}


def build_spark(config: TieringConfig):
    """The SparkSession for ``config``: spark-submit's settings win, plain `python` gets local[*]."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(f"kv-tiering:{config.job.name}")
    if "PYSPARK_GATEWAY_PORT" not in os.environ and "spark.master" not in config.spark:
        builder = builder.master("local[*]")
    for key, value in {**config.spark, **REQUIRED_SPARK_CONF}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


@dataclass
class JobResult:
    """How a run ended: rounds committed and the tables whose last round failed."""

    rounds: int = 0
    failed_tables: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed_tables


class TieringJob:
    """One leadership term's query. ``fence`` raises when this driver is no longer the leader."""

    def __init__(
        self,
        spark,
        config: TieringConfig,
        epoch: int,
        *,
        fence: Callable[[], None] = lambda: None,
        on_round: Callable[[RoundOutcome], None] = lambda outcome: None,
    ) -> None:
        self.spark = spark
        self.config = config
        self.epoch = epoch
        self.client = KvStoreClient(config.kvstore.url, config.kvstore.token.get_secret_value() or None)
        self.lease = JobLease(
            self.client,
            load_or_create_lease_id(config.job.checkpoint, config.job.name),
            epoch,
            int(config.lease.duration_s * 1000),
        )
        self.result = JobResult()
        self._fence = fence
        self._on_round = on_round
        self._renewer: LeaseRenewer | None = None
        self._query = None
        self._lock = threading.Lock()

    def start(self):
        """Start the streaming query (and the lease renewer); returns Spark's StreamingQuery."""
        from tiering.lake.writers import make_round_writer

        self.spark.dataSource.register(KvTieringDataSource)
        lake = self.config.lake
        writer = make_round_writer(
            self.spark, lake.root, self.config.job.name, lake.writer, merge_max_changes=lake.merge_max_changes
        )
        committer = RoundCommitter(
            writer,
            self.client,
            self.lease,
            lake_root=lake.root,
            epoch=self.epoch,
            fence=self._check,
            on_round=self._round_done,
        )
        stream = (
            self.spark.readStream.format(KvTieringDataSource.name()).options(**self._source_options()).load()
        )
        trigger = (
            {"availableNow": True}
            if self.config.trigger.available_now
            else {"processingTime": f"{self.config.trigger.interval_s} seconds"}
        )
        if self.config.lease.renew:
            self._renewer = LeaseRenewer(self.lease).start()
        self._query = (
            stream.writeStream.queryName(f"kv-tiering:{self.config.job.name}")
            .foreachBatch(committer)
            .option("checkpointLocation", self.config.job.checkpoint)
            .trigger(**trigger)
            .start()
        )
        log.info(
            "job=%s epoch=%d lease=%s query started (%s)",
            self.config.job.name, self.epoch, self.lease.lease_id,
            "availableNow" if self.config.trigger.available_now else f"every {self.config.trigger.interval_s}s",
        )
        return self._query

    def run(self, stop: threading.Event | None = None, poll_s: float = 0.5) -> JobResult:
        """Run until the query ends (availableNow) or ``stop`` is set; always stops cleanly."""
        from pyspark.errors import StreamingQueryException

        query = self.start()
        try:
            try:
                while query.isActive and not (stop is not None and stop.is_set()):
                    query.awaitTermination(poll_s)
            except StreamingQueryException as e:  # the query failed while we waited
                raise TieringError(f"job {self.config.job.name!r}: query failed: {e}", epoch=self.epoch) from e
            error = query.exception()
            if error is not None:
                raise TieringError(f"job {self.config.job.name!r}: query failed: {error}", epoch=self.epoch)
        finally:
            self.stop()
        return self.result

    def stop(self) -> None:
        """Stop the query between rounds and stop renewing; drop the lease if still the leader.

        A driver that lost its term must not drop the lease: the new leader uses the same lease
        id (it lives in the shared checkpoint), and the store would refuse the stale epoch anyway.
        """
        if self._query is not None and self._query.isActive:
            self._query.stop()
        if self._renewer is not None:
            self._renewer.stop()
        try:
            self._check()
            self.lease.drop()
        except TieringError as e:
            log.warning("job=%s epoch=%d stopped without dropping lease %s: %s", self.config.job.name, self.epoch, self.lease.lease_id, e)
            return
        log.info("job=%s epoch=%d stopped; lease %s dropped", self.config.job.name, self.epoch, self.lease.lease_id)

    def _check(self) -> None:
        self._fence()
        if self._renewer is not None:
            self._renewer.check()

    def _round_done(self, outcome: RoundOutcome) -> None:
        with self._lock:
            self.result.rounds += 1
            for table in outcome.committed:
                self.result.failed_tables.pop(table, None)
            self.result.failed_tables.update(outcome.failed)
        self._on_round(outcome)

    def _source_options(self) -> dict[str, str]:
        c = self.config
        return {
            "kvstore.url": c.kvstore.url,
            "kvstore.token": c.kvstore.token.get_secret_value(),
            "job": c.job.name,
            "checkpoint": c.job.checkpoint,
            "lake.root": c.lake.root,
            "epoch": str(self.epoch),
            "lease.duration_ms": str(int(c.lease.duration_s * 1000)),
            "tables.include": json.dumps(list(c.tables.include)),
            "tables.exclude": json.dumps(list(c.tables.exclude)),
            "max_splits_per_trigger": str(c.limits.max_splits_per_trigger),
            "max_bytes_per_trigger": str(c.limits.max_bytes_per_trigger),
            "fail_on_data_loss": str(c.limits.fail_on_data_loss).lower(),
        }


def run_as_leader(config: TieringConfig, *, stop: threading.Event | None = None) -> JobResult:
    """Wait to lead the job, run its query for the term, then give leadership back.

    A standby waits inside ``acquire_leadership``; ``stop`` set while it waits ends the wait
    (an empty result: it never led). Losing the term stops the query and raises
    :class:`LeadershipLostError` (the caller exits non-zero: another driver now owns the job,
    or ZooKeeper was out of reach longer than the session timeout and a supervisor restarts it).
    """
    import socket

    from tiering.coord.leader import acquire_leadership
    from tiering.errors import CoordinationError, LeadershipLostError

    zk = config.zookeeper
    auth = (zk.auth_user, zk.auth_password.get_secret_value()) if zk.auth_user and zk.auth_password else None
    owner = {"host": socket.gethostname(), "pid": os.getpid()}
    log.info("job=%s waiting for leadership at %s", config.job.name, zk.hosts)
    try:
        term = acquire_leadership(zk.hosts, config.job.name, zk.session_timeout_s, owner=owner, auth=auth, cancel=stop)
    except CoordinationError:
        if stop is not None and stop.is_set():
            log.info("job=%s stopped while waiting for leadership", config.job.name)
            return JobResult()
        raise
    log.info("job=%s leader with epoch=%d", config.job.name, term.epoch)
    ended = _either(stop, term.lost)
    try:
        from tiering import observability

        spark = build_spark(config)
        job = TieringJob(
            spark, config, term.epoch, fence=term.check, on_round=observability.attach(spark, config, term.epoch)
        )
        try:
            result = job.run(stop=ended)
        except Exception as e:
            # A query failing because the term ended (fence raised, store said FENCED_EPOCH) is a
            # leadership loss, whatever wrapper Spark put around it; anything else is re-raised.
            reason = _lost_reason(term)
            if reason is None:
                raise
            raise LeadershipLostError(
                f"job {config.job.name!r}: leadership lost ({reason}); query stopped, lease left to the new leader",
                epoch=term.epoch,
            ) from e
        if term.lost.is_set():
            raise LeadershipLostError(
                f"job {config.job.name!r}: leadership lost ({term.lost_reason}); stopped without dropping the lease",
                epoch=term.epoch,
            )
        return result
    finally:
        term.resign()


def _lost_reason(term) -> str | None:
    """Why ``term`` is over, or None while it still holds (asks ZooKeeper if need be)."""
    from tiering.errors import LeadershipLostError

    if term.lost.is_set():
        return term.lost_reason
    try:
        term.check()
    except LeadershipLostError as e:
        return str(e)
    return None


def _either(a: threading.Event | None, b: threading.Event) -> threading.Event:
    """An event set as soon as either is set (polled by TieringJob.run)."""
    if a is None:
        return b

    class _Either(threading.Event):
        def is_set(self) -> bool:
            return a.is_set() or b.is_set()

    return _Either()
