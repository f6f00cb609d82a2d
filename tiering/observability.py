"""Per-round visibility: one log line per table per round, Prometheus metrics, a query listener.

Failure mode this addresses: a job that runs but does not move. A table that fails every
round, lag that only grows, a lease that keeps pinning snapshots, a driver that stopped being
the leader — Spark's own log shows none of it by table. Every round therefore logs one line per
table (buckets bootstrapped from a snapshot and buckets given changelog records, changes read,
rows written, offsets, lag, epoch, lease id) under the ``tiering.progress`` logger and sets the
same numbers as metrics labelled by job and table; a ``StreamingQueryListener`` adds what only
Spark knows (batch duration; the round's splits, one per bucket's snapshot or changelog range of
every table, from its end offset).

Observing never fails the job: the hook and the listener log their own errors and return, so
a broken metrics path cannot stop tiering (the round is already committed when they run).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections import Counter as Tally
from collections.abc import Callable, Sequence

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from pyspark.sql.streaming import StreamingQueryListener

from tiering.context import TermContext
from tiering.delta_log.freshness import freshness_s, oldest_untiered_write_ms
from tiering.enumerator.positions import LakePosition
from tiering.errors import TieringError
from tiering.kvstore.contract import PlanningStore, TableLog
from tiering.lease.job_lease import JobLease
from tiering.round.outcome import RoundOutcome
from tiering.round.table_states import FailureCause

__all__ = [
    "TieringMetrics",
    "FreshnessCollector",
    "LeaseCollector",
    "OwnershipCollector",
    "RoundObserver",
    "ProgressListener",
    "serve_metrics",
]

log = logging.getLogger("tiering.progress")


class FreshnessCollector(Collector):
    """``kv_tiering_freshness_seconds``, computed when Prometheus scrapes, not after each round.

    Freshness needs the store's log ends and, for a table that lags, its first untiered change
    (a changelog read through the store seam): work per table that would otherwise sit in every round's path. A
    round only records the table's new position; a scrape (every 15-60 s) pays the reads, in
    the metrics server's thread. A table whose store or files are out of reach at scrape time
    has no sample rather than a wrong one.
    """

    _NAME = "kv_tiering_freshness_seconds"
    _HELP = "Age of the oldest store write the lake lacks (0: none)."

    def __init__(self) -> None:
        self._tables: dict[tuple[str, str], tuple[LakePosition, PlanningStore]] = {}
        self._lock = threading.Lock()

    def track(self, job: str, table: str, position: LakePosition, store: PlanningStore) -> None:
        with self._lock:
            self._tables[(job, table)] = (position, store)

    def forget(self, job: str, table: str) -> None:
        with self._lock:
            self._tables.pop((job, table), None)

    def describe(self):
        yield GaugeMetricFamily(self._NAME, self._HELP, labels=["job", "table"])

    def collect(self):
        family = GaugeMetricFamily(self._NAME, self._HELP, labels=["job", "table"])
        with self._lock:
            tables = sorted(self._tables.items())
        now_ms = int(time.time() * 1000)
        logs = self._log_ends(tables)
        for (job, table), (position, store) in tables:
            found = logs.get(id(store), {}).get(table)
            if found is None:
                continue
            try:
                oldest = oldest_untiered_write_ms(store, table, position, found.buckets.values())
            except (TieringError, OSError):
                continue
            family.add_metric([job, table], freshness_s(oldest, now_ms))
        yield family

    @staticmethod
    def _log_ends(tables) -> dict[int, dict[str, TableLog]]:
        """Every tracked table's log ends, one store call per store (a scrape of a job with a
        thousand tables must not make a thousand calls); a store that fails answers none."""
        names: dict[int, tuple[PlanningStore, list[str]]] = {}
        for (_, table), (_, store) in tables:
            names.setdefault(id(store), (store, []))[1].append(table)
        logs: dict[int, dict[str, TableLog]] = {}
        for key, (store, wanted) in names.items():
            try:
                logs[key] = store.log_ends(wanted)
            except TieringError:
                logs[key] = {}
        return logs


class LeaseCollector(Collector):
    """``kv_tiering_lease_expiry_timestamp_seconds``, ``kv_tiering_lease_duration_seconds`` and
    ``kv_tiering_lease_enabled``, per job.

    Failure mode: a lease that lapses while the job runs (a renewer that died, a store that
    refuses or never receives renewals) no longer keeps the store's GC off the snapshots a round
    reads. The expiry is ``lease.duration_s`` after this driver sent the last acquire or renewal
    the store took (:attr:`JobLease.expires_at_ms`), never later than the store's own; read when
    scraped. A renewed lease stays at least two thirds of its duration ahead of now, so an expiry
    closer than a third means two renewals missed; one in the past, a lease that lapsed. No
    sample before the store first took a call, nor after a clean stop dropped the lease.
    """

    _EXPIRY = ("kv_tiering_lease_expiry_timestamp_seconds", "When the job's lease expires unless renewed (Unix time).")
    _DURATION = ("kv_tiering_lease_duration_seconds", "Lease duration: each renewal extends the lease this far.")
    _ENABLED = (
        "kv_tiering_lease_enabled",
        "1 while the job holds snapshots under a lease, 0 when the store has no "
        "lease API (its GC may delete a snapshot a bootstrap reads).",
    )

    def __init__(self) -> None:
        self._leases: dict[str, JobLease] = {}
        self._lock = threading.Lock()

    def track(self, job: str, lease: JobLease) -> None:
        with self._lock:
            self._leases[job] = lease

    def describe(self):
        yield GaugeMetricFamily(*self._EXPIRY, labels=["job"])
        yield GaugeMetricFamily(*self._DURATION, labels=["job"])
        yield GaugeMetricFamily(*self._ENABLED, labels=["job"])

    def collect(self):
        expiry = GaugeMetricFamily(*self._EXPIRY, labels=["job"])
        duration = GaugeMetricFamily(*self._DURATION, labels=["job"])
        enabled = GaugeMetricFamily(*self._ENABLED, labels=["job"])
        with self._lock:
            leases = sorted(self._leases.items())
        for job, lease in leases:
            enabled.add_metric([job], 1 if lease.enabled else 0)
            expires_at_ms = lease.expires_at_ms
            if expires_at_ms is not None:
                expiry.add_metric([job], expires_at_ms / 1000)
                duration.add_metric([job], lease.duration_ms / 1000)
        yield expiry
        yield duration
        yield enabled


class OwnershipCollector(Collector):
    """``kv_tiering_table_epoch``: in a tiering group, the tables this member owns, each at its
    table epoch, labelled with the group; read when scraped from the ownership the leader last
    wrote (coord/ownership.py), so a table that moved away has no sample from this member at once
    and its new owner's sample names it. One series per owned table: the group's tables once over
    its members."""

    _NAME = "kv_tiering_table_epoch"
    _HELP = "Table epoch under which this member of a tiering group owns the table (owned tables only)."
    _LABELS = ["job", "group", "table"]

    def __init__(self) -> None:
        self._terms: dict[str, TermContext] = {}
        self._lock = threading.Lock()

    def track(self, context: TermContext) -> None:
        with self._lock:
            self._terms[context.job] = context

    def describe(self):
        yield GaugeMetricFamily(self._NAME, self._HELP, labels=self._LABELS)

    def collect(self):
        family = GaugeMetricFamily(self._NAME, self._HELP, labels=self._LABELS)
        with self._lock:
            terms = sorted(self._terms.items())
        for job, context in terms:
            try:
                ownership = context.ownership()
            except TieringError:
                continue
            for table, epoch in sorted(ownership.tables.items()) if ownership is not None else ():
                family.add_metric([job, ownership.group, table], epoch)
        yield family


class TieringMetrics:
    """The job's Prometheus metrics; one set per registry (the default one in production)."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        by_table = ["job", "table"]
        self.rounds = Counter("kv_tiering_rounds", "Rounds finished (committed or not).", ["job"], registry=registry)
        self.table_rounds = Counter(
            "kv_tiering_table_rounds", "Table rounds by outcome.", [*by_table, "outcome"], registry=registry
        )
        self.failures = Counter(
            "kv_tiering_table_failures",
            "Table rounds that failed, by what they failed on (the failure's typed cause).",
            [*by_table, "cause"],
            registry=registry,
        )
        self.unreported = Counter(
            "kv_tiering_table_reports_deferred",
            "Committed table rounds whose lake report the store refused (sent again next round).",
            by_table,
            registry=registry,
        )
        self.splits = Counter("kv_tiering_splits", "Splits applied to the lake.", by_table, registry=registry)
        self.rows = Counter(
            "kv_tiering_rows", "Changelog records applied (changes in, not rows written).", by_table, registry=registry
        )
        self.lake_offset = Gauge(
            "kv_tiering_lake_offset",
            "Sum over buckets of the lake's exclusive log offset.",
            by_table,
            registry=registry,
        )
        self.lag = Gauge(
            "kv_tiering_lag_records", "Changelog records the store holds beyond the lake.", by_table, registry=registry
        )
        self.lake_version = Gauge(
            "kv_tiering_lake_version", "Delta version of the table's last commit.", by_table, registry=registry
        )
        self.leased = Gauge(
            "kv_tiering_leased_snapshots",
            "Buckets whose snapshots the job's lease holds after the round (none where the store lists no holds).",
            by_table,
            registry=registry,
        )
        self.freshness = FreshnessCollector()
        registry.register(self.freshness)
        self.freshness_target = Gauge(
            "kv_tiering_freshness_target_seconds",
            "The table's freshness target ([tables] freshness_target_s, freshness_targets).",
            by_table,
            registry=registry,
        )
        self.lease = LeaseCollector()
        registry.register(self.lease)
        self.owned = OwnershipCollector()
        registry.register(self.owned)
        self.last_commit = Gauge(
            "kv_tiering_last_commit_timestamp_seconds",
            "When the table last committed (Unix time).",
            by_table,
            registry=registry,
        )
        self.failures_in_a_row = Gauge(
            "kv_tiering_table_consecutive_failures",
            "Rounds in a row the table failed (0 after a commit).",
            by_table,
            registry=registry,
        )
        self.dropped = Gauge(
            "kv_tiering_table_dropped",
            "1 when the table was dropped from the store (its lake table is kept).",
            by_table,
            registry=registry,
        )
        self.epoch = Gauge("kv_tiering_epoch", "Leadership epoch of this driver.", ["job"], registry=registry)
        self.leader = Gauge(
            "kv_tiering_leader",
            "1: this driver leads the job (set when its term begins; a driver exits when its "
            "term ends, and its series with it).",
            ["job"],
            registry=registry,
        )
        self.round = Gauge("kv_tiering_round", "Id of the last finished round.", ["job"], registry=registry)
        self.batch_seconds = Gauge(
            "kv_tiering_batch_duration_seconds",
            "Wall time of the last micro-batch (Spark).",
            ["job"],
            registry=registry,
        )
        self.batch_splits = Gauge(
            "kv_tiering_batch_input_splits",
            "Splits of the last micro-batch (its end offset).",
            ["job"],
            registry=registry,
        )


_DEFAULT_METRICS: TieringMetrics | None = None


def default_metrics() -> TieringMetrics:
    """The process-wide metrics in the default registry (created once: names must be unique)."""
    global _DEFAULT_METRICS
    if _DEFAULT_METRICS is None:
        _DEFAULT_METRICS = TieringMetrics()
    return _DEFAULT_METRICS


def serve_metrics(port: int, addr: str = "0.0.0.0") -> None:
    """Expose the default registry at ``http://<addr>:<port>/metrics`` (a daemon thread)."""
    default_metrics()  # registered now, so the endpoint lists them before the first round
    try:
        start_http_server(port, addr=addr)
    except OSError as e:
        raise TieringError(f"cannot serve metrics on {addr}:{port}: {e.strerror or e}") from None
    logging.getLogger(__name__).info("Prometheus metrics at http://%s:%d/metrics", addr, port)


class RoundObserver:
    """The ``on_round`` hook of :class:`tiering.job.TieringJob`: logs and records each round.

    ``listeners`` are called after with the same outcome (the demo's progress display).
    """

    def __init__(
        self,
        context: TermContext,
        lease: JobLease,
        *,
        metrics: TieringMetrics | None = None,
        listeners: Sequence[Callable[[RoundOutcome], None]] = (),
    ) -> None:
        self.job = context.job
        self.epoch = context.epoch
        self._lease = lease
        self._metrics = metrics or default_metrics()
        self._listeners = list(listeners)
        #: the store as the seam has it, one for the job's tables: a scrape reads their log ends at once
        self._planning = context.planning_store()
        self._tables = context.config.tables
        self._metrics.epoch.labels(self.job).set(self.epoch)
        self._metrics.leader.labels(self.job).set(1)
        self._metrics.lease.track(self.job, lease)
        self._metrics.owned.track(context)

    def __call__(self, outcome: RoundOutcome) -> None:
        try:
            self._observe(outcome)
        except Exception:  # noqa: BLE001 - observing must never fail a committed round
            logging.getLogger(__name__).exception(
                "job=%s round=%d: recording progress failed", self.job, outcome.round_id
            )
        for listener in self._listeners:
            listener(outcome)

    def _observe(self, outcome: RoundOutcome) -> None:
        m = self._metrics
        lease_id = self._lease.lease_id
        held = self._lease.held()
        #: buckets held per table; None: the store lists no holds (Fluss), so the count is unknown
        holds = None if held is None else Tally(b.table_id for b in held)
        m.rounds.labels(self.job).inc()
        m.round.labels(self.job).set(outcome.round_id)
        for table in outcome.table_ids:
            m.freshness_target.labels(self.job, table).set(self._tables.freshness_target(table))
            for cause in FailureCause:  # at 0 from the start: increase() misses a counter born at 1
                m.failures.labels(self.job, table, cause)
        for table, commit in sorted(outcome.committed.items()):
            splits = len(commit.bootstrap_buckets) + len(commit.log_buckets)
            offsets = dict(sorted(commit.positions.items()))
            lag = outcome.lag.get(table)
            leased = None if holds is None else holds.get(commit.table_id, 0)
            m.table_rounds.labels(self.job, table, "committed").inc()
            m.splits.labels(self.job, table).inc(splits)
            m.rows.labels(self.job, table).inc(commit.rows_in)
            m.lake_offset.labels(self.job, table).set(sum(offsets.values()))
            if lag is not None:  # unknown when the store could not say: the last known value stays
                m.lag.labels(self.job, table).set(lag)
            if table in outcome.unreported:
                m.unreported.labels(self.job, table).inc()
            m.lake_version.labels(self.job, table).set(commit.delta_version)
            if leased is not None:
                m.leased.labels(self.job, table).set(leased)
            m.freshness.track(self.job, table, LakePosition(commit.table_id, commit.positions), self._planning)
            log.info(
                "job=%s round=%d table=%s status=%s table_id=%d snapshot_buckets=%d log_buckets=%d "
                "changes=%d rows_written=%d written_by=%s offsets=%s lag=%s delta_version=%d epoch=%d lease=%s "
                "leased_snapshots=%s",
                self.job,
                outcome.round_id,
                table,
                "skipped" if commit.skipped else "committed",
                commit.table_id,
                len(commit.bootstrap_buckets),
                len(commit.log_buckets),
                commit.rows_in,
                commit.rows_out,
                "-" if commit.skipped else commit.written_by.name.lower(),
                offsets,
                "unknown" if lag is None else lag,
                commit.delta_version,
                self.epoch,
                lease_id,
                "unknown" if leased is None else leased,
            )
        for table, health in outcome.health.items():
            if health.last_commit_ms is not None:
                m.last_commit.labels(self.job, table).set(health.last_commit_ms / 1000)
            m.failures_in_a_row.labels(self.job, table).set(health.consecutive_failures)
            m.dropped.labels(self.job, table).set(1 if health.dropped else 0)
            if health.dropped:
                m.freshness.forget(self.job, table)
        for table in sorted(outcome.table_ids.keys() - outcome.health.keys()):
            # a table of the round with no health record moved to another member: its streak is the
            # new owner's to export, and one left here would alert for a table this member let go
            with contextlib.suppress(KeyError):
                m.failures_in_a_row.remove(self.job, table)
        for table, failure in sorted(outcome.failed.items()):
            m.table_rounds.labels(self.job, table, "failed").inc()
            m.failures.labels(self.job, table, failure.cause).inc()
            log.warning(
                "job=%s round=%d table=%s status=failed cause=%s state=%s epoch=%d lease=%s error=%s",
                self.job,
                outcome.round_id,
                table,
                failure.cause,
                failure.state,
                self.epoch,
                lease_id,
                failure,
            )


class ProgressListener(StreamingQueryListener):
    """Spark's view of each micro-batch of the tiering query, as a log line and two gauges.

    Spark calls these methods on its listener bus; they must return quickly and never raise.
    Only queries named ``kv-tiering:<job>`` are reported (the session may run others).

    Spark delivers a query's last progress and its termination on its listener bus after the
    query has stopped, through py4j's callback server into this process. A listener still
    registered when the process exits is called on a closed server: Spark logs a
    ``Py4JException`` stack trace after the job's last line. :meth:`detach` therefore waits until
    the end of every run this listener saw start was delivered, then unregisters it.
    """

    def __init__(self, job: str, metrics: TieringMetrics | None = None) -> None:
        self.job = job
        self.query_name = f"kv-tiering:{job}"
        self._metrics = metrics or default_metrics()
        self.batches = 0
        self._running: set[str] = set()  # run ids of this job's query, started and not yet ended
        self._ended = threading.Condition()

    def detach(self, spark, timeout_s: float = 10.0) -> None:
        """Unregister from ``spark`` once the runs it saw start have ended (at most ``timeout_s``).

        Spark calls :meth:`onQueryStarted` before ``start()`` returns, so a run started is known here."""
        from py4j.protocol import Py4JError

        with self._ended:
            if not self._ended.wait_for(lambda: not self._running, timeout_s):
                logging.getLogger(__name__).warning(
                    "job=%s: Spark did not deliver the end of query run(s) %s within %.0fs",
                    self.job,
                    sorted(self._running),
                    timeout_s,
                )
        try:
            spark.streams.removeListener(self)
        except Py4JError as e:  # the JVM is gone: nothing will call this listener again
            logging.getLogger(__name__).warning("job=%s: query listener not removed: %s", self.job, e)

    def onQueryStarted(self, event) -> None:
        if event.name == self.query_name:
            with self._ended:
                self._running.add(str(event.runId))
            log.info("job=%s query %s started (run %s)", self.job, event.id, event.runId)

    def onQueryProgress(self, event) -> None:
        progress = event.progress
        if progress.name != self.query_name:
            return
        try:
            seconds = progress.batchDuration / 1000.0
            self.batches += 1
            self._metrics.batch_seconds.labels(self.job).set(seconds)
            end = _decoded(progress.sources[0].endOffset if progress.sources else None)
            splits = len(end.get("splits", ())) if "addBatch" in progress.durationMs else 0
            self._metrics.batch_splits.labels(self.job).set(splits)
            log.info(
                "job=%s batch=%d splits=%d duration=%.2fs end_offset=epoch=%s round=%s",
                self.job,
                progress.batchId,
                splits,
                seconds,
                end.get("epoch"),
                end.get("round"),
            )
        except Exception:  # noqa: BLE001 - a listener must not break Spark's listener bus
            logging.getLogger(__name__).exception("job=%s: reading query progress failed", self.job)

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        with self._ended:
            if str(event.runId) not in self._running:
                return
            self._running.discard(str(event.runId))
            self._ended.notify_all()
        if event.exception:
            log.error("job=%s query %s terminated with: %s", self.job, event.id, event.exception.splitlines()[0])
        else:
            log.info("job=%s query %s terminated", self.job, event.id)


def _decoded(offset: object) -> dict:
    """The source's JSON offset (see tiering/state/offset.py) as a dict; {} when there is none."""
    try:
        data = json.loads(offset) if isinstance(offset, str) else offset
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
