"""Commits one round (one micro-batch of split descriptors) to the lake: every table at once.

A round goes: every table is prepared (its Delta table read once, splits trimmed to what the
lake lacks, its snapshots re-acquired under the lease — one acquire for the whole round — and
its files resolved and planned per bucket); then one Spark job writes every table's bucket
files on the executors; then each table makes its one commit, reports its offsets and releases
its buckets. Tables are prepared and committed ``lake.table_parallelism`` at a time: delta-rs
commits and store calls wait on I/O, and a round of hundreds of small tables must not pay for
them one after the other.

Failure modes and what happens:
- a table fails (a schema change the lake cannot follow, snapshot gone, I/O, a failed bucket write): its leased
  buckets are released, the failure is recorded, and the other tables still commit; the table
  is re-planned next round from its lake position, which did not move;
- a table is dropped upstream mid-round (its files vanish, its report gets a 404): it fails
  like any table and is reported as dropped; its lake table is kept, and it is not planned again
  (a table re-created under the name has a new ``table_id`` and is bootstrapped afresh);
- this driver is no longer the leader (:class:`NotLeaderError`: the store's fenced reply, a
  lost ZooKeeper term, a newer Delta commit): the error propagates and stops the query —
  nothing more of this round lands, and nothing is released (the new leader owns the lease);
- the round aborts as a whole (any other error escaping): the tables not yet settled are
  released (their readers failed over) and the error stops the query;
- the round is a replay (crash, new leader): splits are trimmed to what the lake lacks, and the
  writer skips a commit whose ``(epoch, round)`` is already there.
Snapshots are re-acquired under the lease right before they are read: a lease that expired
mid-round is re-established and the snapshot files re-checked, never assumed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from tiering import failpoints
from tiering.context import TermContext
from tiering.enumerator.positions import LakePosition
from tiering.enumerator.splits import LogSplit, SnapshotSplit, Split
from tiering.errors import NotLeaderError, SnapshotUnavailableError, StoreError, TableNotFoundError, TieringError
from tiering.kvstore.client import KvStoreClient
from tiering.kvstore.models import LakeReport, LogRange, SnapshotRef, TableInfo
from tiering.lake.round_protocol import PreparedRound, RoundWriter, TableCommit
from tiering.lakestate.lake import LakeTables
from tiering.lakestate.replay import missing_splits
from tiering.lease.release import LeaseReleases
from tiering.state.offset_log import read_batch_offset
from tiering.state.table_health import TableHealth

log = logging.getLogger(__name__)


@dataclass
class RoundOutcome:
    """What one round did, for logs, metrics and the availableNow exit code."""

    round_id: int
    epoch: int
    committed: dict[str, TableCommit] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    #: changelog records the store holds beyond the lake, per committed table, after the round
    lag: dict[str, int] = field(default_factory=dict)
    #: every table of the round -> the ``table_id`` it was planned for
    table_ids: dict[str, int] = field(default_factory=dict)
    #: failed tables the store no longer has (dropped upstream, maybe mid-round)
    dropped: set[str] = field(default_factory=set)
    #: every table's health after this round (filled in by the job, which keeps it)
    health: Mapping[str, TableHealth] = field(default_factory=dict)


@dataclass
class _TableRound:
    """One table's share of the round as it moves through the steps."""

    name: str
    splits: list[Split]
    started: float = field(default_factory=time.monotonic)
    prepared: PreparedRound | None = None

    @property
    def table_id(self) -> int:
        return self.splits[0].table_id

    @property
    def leased(self) -> list[int]:
        """The buckets whose snapshot the lease holds for this round."""
        return sorted({s.bucket for s in self.splits if isinstance(s, SnapshotSplit)})


class RoundCommitter:
    """The ``foreachBatch`` function of the tiering query."""

    def __init__(
        self,
        writer: RoundWriter,
        context: TermContext,
        client: KvStoreClient,
        releases: LeaseReleases,
        *,
        fence: Callable[[], None] = lambda: None,
        on_round: Callable[[RoundOutcome], None] = lambda outcome: None,
    ) -> None:
        self._writer = writer
        self._context = context
        self._client = client
        self._releases = releases
        self._fence = fence
        self._on_round = on_round
        self._lake = LakeTables(context.lake)
        self._parallelism = context.config.lake.table_parallelism

    def __call__(self, batch_df, batch_id: int) -> None:
        """Commit the round of batch ``batch_id``. Its splits are the batch's end offset, read
        from the offsets log Spark wrote before the batch (the descriptor rows of ``batch_df``
        are the same splits, but reading them is a Spark job: see :mod:`tiering.state.offset_log`)."""
        offset = read_batch_offset(self._context.config.job.checkpoint, batch_id)
        by_table: dict[str, list[Split]] = defaultdict(list)
        for split in offset.splits:
            by_table[split.table].append(split)
        round_id = offset.round
        outcome = RoundOutcome(round_id, self._context.epoch)
        tables = [_TableRound(name, splits) for name, splits in sorted(by_table.items())]
        outcome.table_ids = {t.name: t.table_id for t in tables}
        unsettled = {t.table_id: t.leased for t in tables}
        try:
            self._run(tables, round_id, outcome, unsettled)
        except NotLeaderError:
            raise
        except BaseException:
            self._releases.failed_over(unsettled)
            raise
        outcome.dropped = self._dropped(outcome.failed)
        self._on_round(outcome)

    def _dropped(self, failed: Mapping[str, str]) -> set[str]:
        """The failed tables the store no longer lists: whatever error a drop caused mid-round
        (a file gone, a 404 on the report), the table is reported as dropped, not as broken."""
        if not failed:
            return set()
        try:
            present = {info.name for info in self._client.list_tables()}
        except StoreError as e:
            log.warning("cannot tell whether failed tables %s were dropped: %s", sorted(failed), e)
            return set()
        return {table for table in failed if table not in present}

    def _run(self, tables: list[_TableRound], round_id: int, outcome: RoundOutcome, unsettled: dict[int, list[int]]) -> None:
        lock = threading.Lock()

        def settle(table: _TableRound, step: Callable[[_TableRound], None]) -> None:
            try:
                step(table)
            except NotLeaderError:
                raise
            except Exception as e:  # one table's failure must not stop the others
                self._fail(table, e, round_id, outcome)
            with lock:
                if table.prepared is None:
                    unsettled.pop(table.table_id, None)

        with ThreadPoolExecutor(self._parallelism, thread_name_prefix="round") as pool:
            gone = self._acquire_snapshots(tables)
            # One call for the round, made after the round's offsets were planned: every change the
            # round reads was written before it, so a column a change carries is in these schemas.
            infos = {info.name: info for info in self._client.list_tables()}
            list(pool.map(lambda t: settle(t, lambda t: self._prepare(t, infos, round_id, gone, outcome)), tables))
            ready = [t for t in tables if t.prepared is not None]
            results = self._writer.write_files([task for t in ready for task in self._writer.tasks(t.prepared)])
            self._fence()
            failpoints.hit("before_delta_commit")

            def commit(table: _TableRound) -> None:
                prepared, table.prepared = table.prepared, None
                self._commit(table, prepared, results.get(table.name, []), round_id, outcome)

            list(pool.map(lambda t: settle(t, commit), ready))

    def _acquire_snapshots(self, tables: Iterable[_TableRound]) -> set[tuple[int, int, int]]:
        """One acquire for every snapshot the round reads; the ones whose files are gone."""
        refs = [SnapshotRef(table_id=s.table_id, bucket=s.bucket, snapshot_id=s.snapshot_id)
                for t in tables for s in t.splits if isinstance(s, SnapshotSplit)]
        gone = self._releases.lease.acquire(refs) if refs else []
        return {(r.table_id, r.bucket, r.snapshot_id) for r in gone}

    def _prepare(
        self, table: _TableRound, infos: dict[str, TableInfo], round_id: int, gone: set[tuple[int, int, int]],
        outcome: RoundOutcome,
    ) -> None:
        current = self._lake.load(table.name)  # the table's one read of this round
        position = current.position() if current is not None else None
        todo = missing_splits(table.splits, position)
        info = infos.get(table.name)
        if info is None:
            raise TableNotFoundError(f"table {table.name!r} was dropped from the store", table=table.name)
        if info.table_id != table.table_id:
            raise TieringError(f"table {table.name!r} was re-created (table_id {table.table_id} -> {info.table_id})",
                               table=table.name)
        lost = [s for s in todo if isinstance(s, SnapshotSplit) and (s.table_id, s.bucket, s.snapshot_id) in gone]
        if lost:
            raise SnapshotUnavailableError(f"table {table.name!r}: snapshots gone before they were read: {lost}",
                                           table=table.name)
        prepared = self._writer.prepare(
            info, todo, self._files(table.name, todo), current,
            epoch=self._context.epoch, round_id=round_id, lease_id=self._context.lease_id,
            replace_table=position is not None and not position.belongs_to(info.table_id),
        )
        if isinstance(prepared, TableCommit):  # already in the lake: a replay; its report may be missing
            self._report(table.name, info.table_id, prepared)
            self._done(table, prepared, round_id, outcome)
        else:
            table.prepared = prepared

    def _files(self, table: str, splits: list[Split]) -> dict[Split, list[str]]:
        """Every split's Parquet files: a snapshot's from the store, the log splits' segments in
        one call for the table."""
        files = {s: list(self._client.get_snapshot(table, s.bucket, s.snapshot_id).files)
                 for s in splits if isinstance(s, SnapshotSplit)}
        logs = [s for s in splits if isinstance(s, LogSplit)]
        if logs:
            ranges = [LogRange(bucket=s.bucket, from_offset=s.start_offset, to_offset=s.end_offset) for s in logs]
            segments = self._client.table_segments(table, ranges)
            files.update({s: [seg.file for seg in found] for s, found in zip(logs, segments)})
        return files

    def _commit(self, table: _TableRound, prepared: PreparedRound, results, round_id: int, outcome: RoundOutcome) -> None:
        commit = self._writer.commit(prepared, results)
        failpoints.hit("after_delta_commit")
        self._report(table.name, prepared.table.table_id, commit)
        failpoints.hit("after_store_report")
        self._done(table, commit, round_id, outcome)

    def _done(self, table: _TableRound, commit: TableCommit, round_id: int, outcome: RoundOutcome) -> None:
        self._releases.finished(table.table_id, table.leased)
        lag = LakePosition(table.table_id, commit.positions).lag(self._client.log_info(table.name).buckets)
        outcome.committed[table.name] = commit
        outcome.lag[table.name] = lag
        log.info(
            "round=%d table=%s table_id=%d epoch=%d lease=%s splits=%d %s offsets=%s lag=%d in %.2fs",
            round_id, table.name, table.table_id, self._context.epoch, self._context.lease_id, len(table.splits), commit,
            dict(sorted(commit.positions.items())), lag, time.monotonic() - table.started,
        )

    def _fail(self, table: _TableRound, error: Exception, round_id: int, outcome: RoundOutcome) -> None:
        table.prepared = None
        outcome.failed[table.name] = f"{type(error).__name__}: {error}"
        log.error("round=%d table=%s FAILED epoch=%d: %s (re-planned next round)", round_id, table.name,
                  self._context.epoch, error)
        self._releases.failed(table.table_id, table.leased)

    def _report(self, table: str, table_id: int, commit: TableCommit) -> None:
        if commit.delta_version < 0:
            return  # nothing of this table is in the lake yet
        buckets = {str(b): offset for b, offset in sorted(commit.positions.items())}
        self._client.report_lake(
            table, LakeReport(table_id=table_id, epoch=self._context.epoch, lake_version=commit.delta_version, buckets=buckets)
        )
