"""Commits one round (one micro-batch of splits) to the lake: every table at once.

Each table of the round is a :class:`~tiering.round.table_round.TableRound` moving through
explicit states (:mod:`tiering.round.table_states`): planned (the batch's splits) -> acquired (one
acquire re-establishes every snapshot of the round under the lease, right before they are
read) -> prepared (its Delta table read once, splits trimmed to what the lake lacks, files
resolved and planned per bucket, its write path decided) -> written (one Spark job writes every
table's executor buckets; a table the driver writes itself is written after the term check) ->
committed (its one Delta commit) -> reported (its lake offsets to the store, where the store
takes them) -> released (its leased buckets let go). Tables are prepared and committed
``lake.table_parallelism`` at a time: delta-rs commits wait on I/O, and a round of hundreds of
small tables must not pay for them one after the other. The store is asked once per step for all
the round's tables (the listing, which job's lake report holds each, the log files, the lake
reports, the release, the log ends for the lag): a round of a thousand tables makes a handful of
calls, not thousands.

The store is any behind the seam (:class:`~tiering.kvstore.contract.PlanningStore`). Where it keeps
its snapshots and changelog as files a round may read (:attr:`~tiering.kvstore.contract.PlanningStore.files`:
the reference store's Parquet), the round asks for them, one call for every table's log ranges;
where it does not (Apache Fluss), the writer's bucket plans carry the store's
:class:`~tiering.kvstore.contract.BucketReader` and each bucket is read through it where it is
written. A store that takes no lake report (``lake_progress`` None, as Fluss) is neither asked
which job's report holds a table nor sent one: its tables go from committed to released.

Failure modes and what happens:
- a table fails before its commit landed (a schema change the lake cannot follow, snapshot
  gone, a failed bucket write, I/O): it ends failed with a typed cause, its leased buckets are
  released once, and the other tables still commit; it is re-planned next round from its lake
  position, which did not move;
- the store refuses a committed table's report or release (a blip): the commit stands and the
  table counts as committed; the report is sent again first thing next round
  (:mod:`tiering.round.deferred`), the release then and at every lease renewal
  (:mod:`tiering.lease.holds`), the lag is left unknown for the round;
- the lease lapsed mid-round (the store paused past ``lease.duration_s``): the renewer holds the
  round's snapshots again; a table whose snapshot was collected meanwhile fails before its
  commit with cause ``snapshot_gone`` and bootstraps again next round;
- another job tiers the table (the store holds that job's lake report: two jobs, two lakes, one
  store table): it fails before its lake is read, naming that job, and the store never sees a
  report of it from this job (docs/DESIGN.md §3, one table, one job);
- a table is dropped upstream mid-round (its files vanish, a 404): before its commit it fails
  like any table and its cause is ``dropped``, found by one listing of the store after the round;
  after its commit (its report finds the table gone) it is committed and dropped; its lake table
  is kept, and it is not planned again (a table re-created under the name has a new ``table_id``);
- in a tiering group, the table moved to another member (the term's write authority,
  :mod:`tiering.coord.write_authority`, made as the round starts, no longer gives it to this
  job, or a Delta commit of a newer table epoch, or the store's 409 ``TABLE_EPOCH_FENCED``): the
  table fails with cause ``moved`` before anything of it lands, its holds are released, and the
  new owner plans it from the lake's positions. A lake report refused so after the commit landed is
  superseded, not deferred: the new owner plans from the lake, which holds that commit, and reports
  its own positions, so the report is dropped with an INFO line, neither sent again nor counted as
  deferred or failed (the table counts as committed). A group's
  rounds commit under the group's name with the table's epoch (``TermContext.writer_id``), so
  that the txn versions order every owner's commits, and a member's first round of a table it was
  given raises the table's fence to its table epoch first (:mod:`tiering.writers.table_fence`), so that
  a commit the old owner prepared before fails; a table that fails in any other way after the
  leader gave it away (its first commit, which creates the Delta table, losing version 0 to the
  new owner's) failed because it moved, and fails with cause ``moved`` too;
- this driver is no longer the leader (:class:`NotLeaderError`: the store's fenced reply, a
  lost ZooKeeper term, a newer Delta commit): the error propagates and stops the query —
  nothing more of this round lands, and nothing is released (the new leader owns the lease);
- the round aborts as a whole (any other error escaping): every table not yet released is
  released (its readers failed over), with the releases still deferred, and the error stops
  the query;
- the round is a replay (crash, new leader): splits are trimmed to what the lake lacks, and the
  writer skips a commit whose ``(epoch, round)`` is already there (acquired -> committed, and its
  report is sent again).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar
from urllib.parse import quote

from tiering import failpoints
from tiering.context import TermContext
from tiering.coord.write_authority import CommitEpoch, WriteAuthority
from tiering.delta_log.commits import round_commit_info
from tiering.delta_log.lake import LakeTables
from tiering.delta_log.layout import app_id, epoch_round
from tiering.delta_log.replay import missing_splits
from tiering.enumerator.positions import LakePosition
from tiering.enumerator.splits import LogSplit, SnapshotSplit, Split
from tiering.errors import (
    ConflictError,
    FencedEpochError,
    NotFoundError,
    NotLeaderError,
    SnapshotUnavailableError,
    StoreError,
    TableEpochFencedError,
    TableMovedError,
    TableNotFoundError,
    TableRecreatedError,
)
from tiering.kvstore.contract import (
    BucketReader,
    LakeProgress,
    LakeProgressReport,
    PlanningStore,
    SnapshotRef,
    StoreTable,
    TableClaims,
)
from tiering.lease.holds import SnapshotHolds
from tiering.round.batch_splits import batch_splits
from tiering.round.deferred import DeferredEnds
from tiering.round.outcome import RoundOutcome
from tiering.round.table_round import TableRound
from tiering.round.table_states import FailureCause, TableState
from tiering.writers.buckets import BucketResult
from tiering.writers.round_writer import RoundWriter, TableCommit
from tiering.writers.table_fence import fence_table

__all__ = ["RoundCommitter", "other_job"]

log = logging.getLogger(__name__)

_Gone = set[tuple[int, int, int]]
#: a table's log files: per log split, in its order, the files holding it
_LogFiles = list[list[str]]
R = TypeVar("R")
A = TypeVar("A")

#: How long one table's store calls (its files, its report, its lag) retry an unavailable store:
#: long enough to ride out a store restart, short enough that a table the store keeps refusing
#: fails (or defers its report) without holding every other table of the round for the whole
#: STORE_RETRY deadline. The round's own calls (the acquire, the listing) keep the full deadline.
TABLE_CALL_RETRY_S = 10.0


def other_job(table: str, job: str, holder: str) -> ConflictError:
    """The error job ``job`` fails ``table``'s round with, before writing anything of it, when the
    store's lake report of the table is job ``holder``'s: the store would refuse the report with
    409 ``OTHER_JOB``, and GC follows the holder's lake, not this one."""
    return ConflictError(
        f"table {table!r} is tiered by job {holder!r} (the store's lake report of it is that job's); one table is "
        f"tiered by one job, so job {job!r} writes nothing of it. Exclude it from one of the two jobs, or hand it "
        f"over: stop job {holder!r} tiering it, then drop its report (`tiering take-over {table} --conf <job {job!r}'s "
        f"config>`, or DELETE /v1/tables/{_url_segment(table)}/lake)",
        code="OTHER_JOB",
        status=409,
        table=table,
    )


def _url_segment(name: str) -> str:
    """``name`` as one segment of the reference store's URLs (dots encoded too: a bare ``.`` or
    ``..`` would be folded away by URL normalization)."""
    return quote(name, safe="").replace(".", "%2E")


class RoundCommitter:
    """The ``foreachBatch`` function of the tiering query (one per term), over any store behind
    the seam."""

    def __init__(
        self,
        writer: RoundWriter,
        context: TermContext,
        store: PlanningStore,
        releases: SnapshotHolds,
        *,
        check_term: Callable[[], None] = lambda: None,
        on_round: Callable[[RoundOutcome], None] = lambda outcome: None,
    ) -> None:
        self._writer = writer
        self._context = context
        self._store = store
        self._table_store = store.with_retry_deadline(TABLE_CALL_RETRY_S)
        #: the reader the bucket plans carry when the store has no files a round may read (picklable:
        #: each task connects on its own); made once per term
        self._reader: BucketReader | None = store.bucket_reader() if store.files is None else None
        self._releases = releases
        self._check_term = check_term
        self._on_round = on_round
        self._lake = LakeTables(context.lake)
        self._parallelism = context.config.lake.table_parallelism
        self._deferred = DeferredEnds()
        self._checkpoint = context.checkpoint
        #: which tables the round may write and under which epoch: made as each round starts (in a
        #: group, what the member owns then)
        self._authority: WriteAuthority

    def __call__(self, batch_df, batch_id: int) -> None:
        """Commit the round of batch ``batch_id`` (its splits: :mod:`tiering.round.batch_splits`)."""
        batch = batch_splits(batch_df, batch_id, self._checkpoint)
        by_table: dict[str, list[Split]] = defaultdict(list)
        for split in batch.splits:
            by_table[split.table].append(split)
        tables = [TableRound(name, splits) for name, splits in sorted(by_table.items())]
        outcome = RoundOutcome(batch.round_id, self._context.epoch, table_ids={t.name: t.table_id for t in tables})
        try:
            self._run(tables, outcome)
        except NotLeaderError:
            raise
        except BaseException:
            self._releases.failed_over({t.table_id: t.leased for t in tables if not t.released})
            raise
        self._mark_dropped(tables)
        outcome.failed = {t.name: t.failure for t in tables if t.failure is not None}
        outcome.dropped.update(
            name for name, failure in outcome.failed.items() if failure.cause is FailureCause.DROPPED
        )
        self._on_round(outcome)

    def _run(self, tables: list[TableRound], outcome: RoundOutcome) -> None:
        self._authority = self._context.write_authority()
        progress = self._table_store.lake_progress
        if progress is not None:
            self._deferred.retry(progress.report)
        with ThreadPoolExecutor(self._parallelism, thread_name_prefix="round") as pool:

            def each(step: Callable[[TableRound], None], state: TableState) -> None:
                """``step`` for every table in ``state``; a table's failure fails it alone."""
                list(pool.map(lambda t: self._settle(t, step), [t for t in tables if t.state is state]))

            gone = self._acquire_snapshots(tables)
            self._releases.retry_refused()  # after the hold: a bucket held again is not let go
            for table in tables:
                if table.state is TableState.PLANNED:
                    table.advance(TableState.ACQUIRED)
            # One call for the round, made after the round's offsets were planned: every change the
            # round reads was written before it, so a column a change carries is in these schemas.
            infos = {info.name: info for info in self._store.tables()}
            holders = _answers(self._holders, dict.fromkeys(t.name for t in tables))
            each(lambda t: self._trim(t, infos, gone, holders.get(t.name)), TableState.ACQUIRED)
            log_files = self._log_files([t for t in tables if t.state is TableState.ACQUIRED])
            each(lambda t: self._prepare(t, infos[t.name], log_files.get(t.name), outcome), TableState.ACQUIRED)
            prepared = [t for t in tables if t.state is TableState.PREPARED]
            results = self._writer.write_files([task for t in prepared for task in self._writer.tasks(t.prepared)])
            self._check_term()
            if prepared:  # a round with nothing to commit (no table of its own yet) has no such point
                failpoints.hit("before_delta_commit")
            each(lambda t: self._write_and_commit(t, results.get(t.name, [])), TableState.PREPARED)
        self._finish([t for t in tables if t.state is TableState.COMMITTED], outcome)

    def _holders(self, tables: dict[str, None]) -> dict[str, tuple[str | None, str | None]]:
        """The job holding each table's lake report and its group, from one call; none from a
        store that takes no report (no job can hold a table there)."""
        if self._table_store.lake_progress is None:
            return {}
        logs = self._table_store.log_ends(list(tables))
        return {
            name: (log.reported.job, log.reported.group) if log.reported is not None else (None, None)
            for name, log in logs.items()
        }

    def _settle(self, table: TableRound, step: Callable[[TableRound], None]) -> None:
        """Run one table's ``step``; a failure before its commit fails the table alone."""
        try:
            step(table)
        except FencedEpochError as e:
            moved = self._authority.fenced(table.name, e)
            if moved is None:
                raise
            self._fail(table, moved)
        except NotLeaderError:
            raise
        except Exception as e:  # one table's failure must not stop the others
            if table.state in (TableState.COMMITTED, TableState.REPORTED, TableState.RELEASED):
                raise  # the steps after a commit handle their own errors: this is a bug, not the table's
            self._fail(table, self._authority.moved_meanwhile(table.name, e))

    def _fail(self, table: TableRound, error: Exception) -> None:
        """Fail ``table`` alone with ``error``, and release its holds (the round's outcome carries
        the failure to the job's one line per table, tiering/observability.py)."""
        table.fail(error)
        self._release_failed(table)

    def _acquire_snapshots(self, tables: list[TableRound]) -> _Gone:
        """One acquire for every snapshot the round reads; the ones whose files are gone.

        In a group it carries the table epochs of their tables, as the planner's does: a table
        that moved between planning and now is refused at the store (``TABLE_EPOCH_FENCED``) and
        fails alone with cause ``moved``. The store refuses such an acquire whole and names no
        table a program can read, so on a refusal each claimed table is asked about alone (a claim
        with no snapshot holds nothing) and the others are acquired again: one call per table,
        only in the round a table moved in."""
        while True:
            live = [t for t in tables if t.state is TableState.PLANNED]
            try:
                gone = self._releases.hold([s.ref for s in _snapshot_splits(live)], self._claims(live))
            except TableEpochFencedError:
                moved = self._refused_claims(live)
                if not moved:
                    raise
                for table, error in moved:
                    self._fail(table, error)
                continue
            return {(r.table_id, r.bucket, r.snapshot_id) for r in gone}

    def _claims(self, tables: list[TableRound]) -> TableClaims | None:
        """In a group, this member's table epochs of the tables whose snapshots ``tables`` read."""
        return self._authority.claims({t.table_id: t.name for t in tables if _snapshot_splits([t])})

    def _refused_claims(self, tables: list[TableRound]) -> list[tuple[TableRound, TableEpochFencedError]]:
        """The tables whose claim alone the store refuses: they moved to another member."""
        refused = []
        for table in tables:
            claim = self._claims([table])
            if claim is None:
                continue
            try:
                self._releases.lease.acquire([], claim)
            except TableEpochFencedError as e:
                refused.append((table, e))
        return refused

    def _trim(
        self,
        table: TableRound,
        infos: dict[str, StoreTable],
        gone: _Gone,
        holder: tuple[str | None, str | None] | StoreError | None,
    ) -> None:
        """The table's one lake read of the round, and its splits trimmed to what the lake lacks
        (a replay's are already there): what it still needs from the store is asked for all
        tables at once. ``holder``: the job whose lake report of the table the store holds, and its
        group; another job's outside this job's group fails the table before anything of it is
        written (the store would refuse its report)."""
        info = infos.get(table.name)
        if info is None:
            raise TableNotFoundError(f"table {table.name!r} was dropped from the store", table=table.name)
        if info.table_id != table.table_id:
            raise TableRecreatedError(
                f"table {table.name!r} was re-created (table_id {table.table_id} -> {info.table_id})", table=table.name
            )
        if isinstance(holder, StoreError):
            raise holder
        job, group = holder or (None, None)
        if job not in (None, self._context.job) and (group is None or group != self._authority.group):
            raise other_job(table.name, self._context.job, job)
        self._authority.check(table.name)
        table.lake = self._lake.load(table.name)
        if self._authority.hands_over and table.lake is not None:
            # Fenced before the splits are trimmed: a commit of the old owner landing after this read
            # conflicts with the fence; one that landed before is in what the trim reads.
            epoch = self._lake_epoch(table)
            if fence_table(table.lake.dt, table.name, writer=self._context.writer_id, epoch=epoch):
                table.lake = self._lake.load(table.name)
        table.todo = missing_splits(table.splits, table.position)
        lost = [s for s in table.todo if isinstance(s, SnapshotSplit) and (s.table_id, s.bucket, s.snapshot_id) in gone]
        if lost:
            raise SnapshotUnavailableError(
                f"table {table.name!r}: snapshots gone before they were read: {lost}", table=table.name
            )

    def _log_files(self, tables: list[TableRound]) -> dict[str, _LogFiles | StoreError]:
        """Every table's log files for its log splits, in one call for the round; what the store
        could not answer for a table is that table's error (the whole call failing is every
        table's). None from a store whose log is read through its reader."""
        store_files = self._table_store.files
        if store_files is None:
            return {}
        ranges = {
            t.name: [(s.bucket, s.start_offset, s.end_offset) for s in t.todo if isinstance(s, LogSplit)]
            for t in tables
        }
        return _answers(store_files.log_files, {name: wanted for name, wanted in ranges.items() if wanted})

    def _prepare(
        self, table: TableRound, info: StoreTable, log_files: _LogFiles | StoreError | None, outcome: RoundOutcome
    ) -> None:
        files = self._split_files(table, log_files)
        epoch = self._lake_epoch(table)
        position = table.position
        prepared = self._writer.prepare(
            info,
            table.todo,
            files,
            table.lake,
            epoch=epoch,
            round_id=outcome.round_id,
            lease_id=self._context.lease_id,
            replace_table=position is not None and not position.belongs_to(info.table_id),
            reader=self._reader,
        )
        if isinstance(prepared, TableCommit):  # already in the lake: a replay; its report may be missing
            table.committed_as(prepared)
        else:
            table.prepared_as(prepared)

    def _split_files(self, table: TableRound, log_files: _LogFiles | StoreError | None) -> dict[Split, list[str]]:
        """Each split's files, where the store has files a round reads (none: the bucket plans read
        through the store's reader): a snapshot's from the store, a log split's from the round's
        one call (``log_files``, in the order of the table's log splits)."""
        store_files = self._table_store.files
        if store_files is None:
            return {}
        files: dict[Split, list[str]] = {
            s: store_files.snapshot_files(table.name, SnapshotRef(s.table_id, s.bucket, s.snapshot_id, s.log_offset))
            for s in table.todo
            if isinstance(s, SnapshotSplit)
        }
        logs = [s for s in table.todo if isinstance(s, LogSplit)]
        if logs:
            if isinstance(log_files, StoreError):
                raise log_files
            if log_files is None or len(log_files) != len(logs):  # a split without its files would lose changes
                raise StoreError(
                    f"table {table.name!r}: the store answered {len(log_files or [])} file lists "
                    f"for {len(logs)} log ranges",
                    table=table.name,
                )
            files.update(zip(logs, log_files, strict=True))
        return files

    def _lake_epoch(self, table: TableRound) -> CommitEpoch:
        """The epoch the table's Delta commit is fenced by: the term's, or in a group the table's.
        A group's table whose lake holds a commit of a newer table epoch moved: refused here, as
        a stale term is by the store (a round the lake already has would otherwise be skipped)."""
        app = app_id(self._context.writer_id, table.name)
        done = table.lake.transaction_version(app) if table.lake is not None else None
        return self._authority.commit_epoch(table.name, epoch_round(done)[0] if done is not None else None)

    def _write_and_commit(self, table: TableRound, results: list[BucketResult]) -> None:
        lost = self._releases.lost()
        unheld = [s for s in table.todo if isinstance(s, SnapshotSplit) and s.ref in lost]
        if unheld:
            raise SnapshotUnavailableError(
                f"table {table.name!r}: the lease lapsed while the round read it and "
                f"these snapshots were collected meanwhile: {unheld}",
                table=table.name,
            )
        table.written_as(self._writer.written_files(table.prepared, results))
        table.committed_as(self._writer.commit(table.prepared, table.written))
        if table.lake is not None:  # a table this round created is read afresh next round
            self._lake.landed(
                table.name, round_commit_info(table.prepared.metadata, table.commit.delta_version, table.name)
            )
        failpoints.hit("after_delta_commit")

    def _finish(self, committed: list[TableRound], outcome: RoundOutcome) -> None:
        """The committed tables' reports, releases and lags: one store call each for the whole
        round. None of them can fail a table: its commit landed. What the store refuses waits
        for the next round."""
        progress = self._table_store.lake_progress
        if progress is not None:  # else the store takes no report: committed, then released
            self._report(progress, committed, outcome)
        failpoints.hit("after_store_report")
        self._release_committed(committed)
        lags = self._lags([t for t in committed if t.name not in outcome.dropped])
        for table in committed:
            commit, lag = table.commit, lags.get(table.name)
            outcome.committed[table.name] = commit
            if lag is not None:
                outcome.lag[table.name] = lag

    def _report(self, progress: LakeProgressReport, committed: list[TableRound], outcome: RoundOutcome) -> None:
        """The committed tables' lake reports, in one call; a refused one waits for the next round
        (one of a table dropped meanwhile, or moved to another member, is not sent again)."""
        reports = {t.name: report for t in committed if (report := self._lake_report(t.table_id, t.commit)) is not None}
        answers = _answers(progress.report, reports)
        for table in committed:
            error = answers.get(table.name)
            if error is None:
                table.advance(TableState.REPORTED)
            elif isinstance(error, NotFoundError):
                log.warning(
                    "round=%d table=%s: Delta version %d committed, then the table was found dropped upstream",
                    outcome.round_id,
                    table.name,
                    table.commit.delta_version,
                )
                outcome.dropped.add(table.name)
            elif isinstance(error, TableMovedError):
                log.info(
                    "round=%d table=%s: Delta version %d committed; its lake report is superseded, not sent again: "
                    "the table moved, and its new owner plans from the lake's positions and reports them: %s",
                    outcome.round_id,
                    table.name,
                    table.commit.delta_version,
                    error,
                )
            else:
                log.warning(
                    "round=%d table=%s: Delta version %d committed, its lake report refused (sent again next "
                    "round): %s",
                    outcome.round_id,
                    table.name,
                    table.commit.delta_version,
                    error,
                )
                self._deferred.add_report(table.name, reports[table.name])
                outcome.unreported.add(table.name)

    def _release_committed(self, committed: list[TableRound]) -> None:
        """The committed tables' one release (one the store refuses is the lease's to send again)."""
        self._releases.finished({t.table_id: t.leased for t in committed if t.leased})
        for table in committed:
            table.released = True
            table.advance(TableState.RELEASED)

    def _release_failed(self, table: TableRound) -> None:
        """A failed table's one release (one the store refuses is the lease's to send again)."""
        self._releases.failed(table.table_id, table.leased)
        table.released = True

    def _lags(self, tables: list[TableRound]) -> dict[str, int]:
        """Records the store holds beyond each table's new position, from one call; none when the
        store cannot say now (the lag is not worth failing a landed commit for)."""
        if not tables:
            return {}
        try:
            logs = self._table_store.log_ends([t.name for t in tables])
        except StoreError as e:
            log.warning("tables %s: lag unknown this round: %s", [t.name for t in tables][:10], e)
            return {}
        return {
            t.name: LakePosition(t.table_id, t.commit.positions).lag(logs[t.name].buckets.values())
            for t in tables
            if t.name in logs and logs[t.name].table_id == t.table_id
        }

    def _lake_report(self, table_id: int, commit: TableCommit) -> LakeProgress | None:
        """What the store is told of the lake after ``commit``; None when the lake has nothing yet."""
        if commit.delta_version < 0:
            return None
        return LakeProgress(
            table_id=table_id,
            epoch=self._context.epoch,
            lake_version=commit.delta_version,
            offsets=dict(sorted(commit.positions.items())),
            job=self._context.job,
            group=self._authority.group,
            table_epoch=self._authority.table_epoch(commit.table),
        )

    def _mark_dropped(self, tables: list[TableRound]) -> None:
        """Failed tables the store no longer lists: whatever error a drop caused mid-round (a file
        gone, a 404), the table's cause is ``dropped``, not what its last step happened to hit.
        One listing, only when a table failed for a cause that could be a drop."""
        unsure = [
            (t, t.failure) for t in tables if t.failure is not None and t.failure.cause is not FailureCause.DROPPED
        ]
        if not unsure:
            return
        try:
            present = {info.name for info in self._store.tables()}
        except StoreError as e:
            log.warning("cannot tell whether failed tables %s were dropped: %s", sorted(t.name for t, _ in unsure), e)
            return
        for table, failure in unsure:
            if table.name not in present:
                table.failure = failure.as_dropped()


def _snapshot_splits(tables: Iterable[TableRound]) -> list[SnapshotSplit]:
    """The snapshot splits of ``tables``: their snapshots are what the round holds under the lease."""
    return [s for t in tables for s in t.splits if isinstance(s, SnapshotSplit)]


def _answers(call: Callable[[dict[str, R]], Mapping[str, A]], request: dict[str, R]) -> dict[str, A | StoreError]:
    """Each table's answer to one batched store call (``name -> request``); the whole call failing
    is every table's answer. A lost term is nobody's answer: it stops the round."""
    if not request:
        return {}
    try:
        return dict(call(request))
    except NotLeaderError:
        raise
    except StoreError as e:
        return {name: e for name in request}
