"""Lake hygiene: compaction, checkpoints with log cleanup, removal of unreferenced files — commits
of the leader, fenced like a round's (docs/DESIGN.md §6). The leader runs a pass between rounds; `tiering
maintain` runs one as a term of its own.

A pass stalls the round loop for as long as it runs (a table is some 50 object-store requests, ~1 s
on S3), so it maintains only the tables that need it: every table on a maintainer's first pass,
then the tables a round committed to since its last pass (:meth:`LakeMaintainer.changed`), and
any table it has not maintained for :func:`revisit_after` (at most :data:`REVISIT_S`). Those run
``parallelism`` at a time (their requests overlap), with at most one compaction at a time (each
holds a bucket's rows in memory).

Failure modes and what happens:
- a stale term maintains a table a newer term already wrote to (a round, or a compaction's
  fence): :class:`FencedEpochError` before anything is committed;
- a stale writer's round prepared before a compaction and committed after it: delta-rs sees no
  conflict between a round's overwrite of a bucket and a data-change = false compaction of it
  (the round would remove the files it read and leave the compacted one: every row twice). So a
  pass that compacts first sets the job's fence on the table (``kvTiering.fenceEpoch.<job>``) to
  its epoch, a metadata change that every commit prepared before it conflicts with: such a round
  fails and is re-planned;
- a round commit landing while a compaction runs: the compaction fails (delta-rs: "a concurrent
  transaction deleted data this operation read"), the round wins; its written files are left
  unreferenced and the table is compacted by a later pass;
- a log cleanup deleting the newest round commit, whose offsets are the lake's position: cleanup
  deletes only entries older than the newest checkpoint, and every checkpoint is at a round
  commit (the writers' own every ``checkpoint_interval`` versions, or this module's, made at the
  newest round commit's version); maintenance commits make none;
- a file a reader of a recent version or a round not yet committed needs: only files unreferenced
  for ``file_retention_hours`` (at least a day) are deleted;
- a table with deletion vectors (delta-spark's MERGE): delta-rs 1.6.6's full vacuum takes the
  vectors' ``deletion_vector_*.bin`` files for unreferenced and deletes them, and the table can no
  longer be read; such a table is vacuumed without ``full`` (only the files its log removed), so
  files no commit ever referenced (a lost race, a crash) stay until a full vacuum by Delta's own;
- a table no round touches keeps unreferenced files that age into deletability (a lost commit
  race, a crash, a compaction's replaced files): it is maintained again at most :data:`REVISIT_S`
  after this maintainer last did, so vacuum reaches it;
- a compaction that undoes the rounds' layout (docs/DESIGN.md §6: key-sorted files whose key ranges
  let a round rewrite only the files its changes touch): files merged in any order would each
  span most of the bucket's keys, so every round would rewrite them all. A bucket of a table whose
  round commits name their sort key (the first key column) is compacted sorted by it (delta-rs's
  Z-order over that one column is its order), into files of about ``target_file_mb`` with their
  statistics, compressed as the rounds' (``lake.compression``); a table whose rounds name none is
  bin-packed as before.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from functools import partial

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.transaction import CommitProperties, PostCommitHookProperties

from tiering.conf.model import MaintenanceConfig
from tiering.delta_log.commits import LakeCommitInfo, fence_epoch, maintenance_metadata, newest_commit
from tiering.delta_log.lake import Lake, has_deletion_vectors, open_table
from tiering.delta_log.layout import BUCKET_COLUMN, CHECKPOINT_INTERVAL_PROPERTY, app_id, epoch_round, fence_property
from tiering.epochs import JobEpoch
from tiering.errors import FencedEpochError, LakeCommitError, NotLeaderError
from tiering.writers.compression import delta_rs_properties

__all__ = ["LakeMaintainer", "MaintenancePass", "TableMaintenance", "revisit_after"]

log = logging.getLogger(__name__)

#: Maintenance commits make no checkpoint and clean no log on their own (see the module doc).
_NO_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
_MIB = 1024 * 1024

#: Seconds after which a table no round committed to is maintained again. What such a table still
#: needs is time-driven: files unreferenced since before the last pass become deletable
#: ``file_retention_hours`` (at least 24) after they were replaced, and log entries expire after
#: ``log_retention_hours``. Revisited hourly, a file outlives its retention by at most an hour
#: plus the pass interval (a few percent of a day's storage), while a table costs one full visit
#: an hour instead of one every pass (every ``every_rounds`` rounds, often minutes apart). A time
#: bound rather than every n-th pass: the passes' spacing depends on the trigger interval and the
#: rounds' length, the files' ageing does not.
REVISIT_S = 3600.0


def revisit_after(table: str, bound: float = REVISIT_S) -> float:
    """Seconds after which ``table``, unchanged, is maintained again: between half of ``bound``
    and all of it, by its name's hash. A term's first pass maintains every table at once; one
    bound for all would bring all the idle ones back in one pass every hour (1,000 tables on S3
    at eight at a time: two minutes of stalled rounds), spread they come back a few per pass."""
    return bound * (0.5 + (zlib.crc32(table.encode()) % 1000) / 2000)


@dataclass(frozen=True)
class TableMaintenance:
    """What one pass did to one table. ``skipped`` says why nothing was looked at."""

    table: str
    epoch: int
    version_before: int = -1
    version_after: int = -1
    files_before: int = 0
    files_after: int = 0
    compacted: tuple[int, ...] = ()
    checkpoint: int | None = None
    vacuumed: int = 0
    seconds: float = 0.0
    skipped: str = ""

    def __str__(self) -> str:
        if self.skipped:
            return f"skipped ({self.skipped})"
        return (
            f"version {self.version_before}->{self.version_after} files {self.files_before}->{self.files_after} "
            f"compacted buckets {list(self.compacted)} checkpoint {self.checkpoint} "
            f"unreferenced files removed {self.vacuumed} in {self.seconds:.2f}s"
        )


@dataclass
class MaintenancePass:
    """One pass over tables: what each did (maintained, or skipped and why), and the tables that
    failed (with why); both in the order the tables were given."""

    epoch: int
    done: dict[str, TableMaintenance] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def skipped(self) -> list[str]:
        return [table for table, done in self.done.items() if done.skipped]

    def __str__(self) -> str:
        skipped = len(self.skipped)
        return (
            f"tables maintained {len(self.done) - skipped} skipped {skipped} failed {len(self.failed)} "
            f"in {self.seconds:.2f}s"
        )


class LakeMaintainer:
    """Maintains the job's tables as term ``epoch``; ``check_term`` raises :class:`NotLeaderError`
    once the term is over (checked before each pass). It remembers, for the passes of its term,
    which tables rounds committed to (:meth:`changed`) and when it last maintained each table
    (``clock``, seconds), to skip the tables nothing changed (see the module doc); a new
    maintainer knows nothing and covers every table."""

    def __init__(
        self,
        lake: Lake,
        job: str,
        config: MaintenanceConfig,
        epoch: JobEpoch,
        *,
        check_term: Callable[[], None] = lambda: None,
        parallelism: int = 1,
        revisit_s: float = REVISIT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lake = lake
        self._job = job
        self._config = config
        self._epoch = epoch
        self._check_term = check_term
        self._parallelism = parallelism
        self._revisit_s = revisit_s
        self._clock = clock
        self._compacting = threading.Lock()
        self._changes = threading.Lock()
        self._changed: set[str] = set()
        self._maintained: dict[str, float] = {}  # table -> clock() at the start of its last pass

    def changed(self, tables: Iterable[str]) -> None:
        """Rounds committed to ``tables``: the next pass maintains them."""
        with self._changes:
            self._changed.update(tables)

    def run(self, tables: Iterable[str]) -> MaintenancePass:
        """One pass; a table's failure is recorded (and the table maintained again next pass) and
        the others go on, a lost term stops it."""
        self._check_term()
        started, now = time.monotonic(), self._clock()
        with self._changes:
            changed, self._changed = self._changed, set()
        reasons = {table: self._why_skip(table, changed, now) for table in tables}
        results = self._maintain_all([table for table, reason in reasons.items() if not reason])
        result = MaintenancePass(self._epoch)
        for table, reason in reasons.items():
            outcome = results.get(table)
            if reason:
                result.done[table] = TableMaintenance(table, self._epoch, skipped=reason)
            elif isinstance(outcome, str):
                result.failed[table] = outcome
            elif outcome is not None:
                result.done[table], self._maintained[table] = outcome, now
        self.changed(result.failed)
        result.seconds = time.monotonic() - started
        log.info("maintenance pass epoch=%d %s", self._epoch, result)
        return result

    def _why_skip(self, table: str, changed: set[str], now: float) -> str:
        """Why this pass leaves ``table`` alone: no round committed to it since this maintainer
        maintained it, less than its :func:`revisit_after` ago. Empty when the pass must maintain it."""
        last = self._maintained.get(table)
        bound = revisit_after(table, self._revisit_s)
        if table in changed or last is None or now - last >= bound:
            return ""
        return (
            f"unchanged: no round committed to it since this term maintained it {now - last:.0f}s ago "
            f"(again once {bound:.0f}s have passed)"
        )

    def _maintain_all(self, tables: list[str]) -> dict[str, TableMaintenance | str]:
        """``tables`` maintained ``parallelism`` at a time: each one's result, or why it failed.
        A lost term (:class:`NotLeaderError`) starts no other table and is raised."""
        if not tables:
            return {}
        with ThreadPoolExecutor(min(self._parallelism, len(tables)), thread_name_prefix="maintenance") as pool:
            futures = {table: pool.submit(self._attempt, table) for table in tables}
            for future in as_completed(futures.values()):
                error = future.exception()
                if error is not None:
                    pool.shutdown(cancel_futures=True)
                    raise error
        return {table: future.result() for table, future in futures.items()}

    def _attempt(self, table: str) -> TableMaintenance | str:
        """:meth:`maintain`, or why it failed; a lost term raises."""
        try:
            return self.maintain(table)
        except NotLeaderError:
            raise
        except Exception as e:  # one table's failure must not stop the others
            log.error("maintenance table=%s FAILED epoch=%d: %s (retried next pass)", table, self._epoch, e)
            return f"{type(e).__name__}: {e}"

    def maintain(self, table: str) -> TableMaintenance:
        """Compact, checkpoint, clean the log and remove unreferenced files of ``table``."""
        started = time.monotonic()
        path = self._lake.path(table)
        dt = open_table(path, self._lake.store.delta_options())
        info = newest_commit(dt, table) if dt is not None else None
        if dt is None or info is None or info.job != self._job:
            return TableMaintenance(table, self._epoch, skipped=f"no table tiered by job {self._job!r}")
        self._check_epoch(table, dt, info)
        version_before, sizes = dt.version(), _file_sizes(dt)
        buckets = self._to_compact(sizes)
        self._set_properties(table, dt, fence=bool(buckets))
        if buckets:
            with self._compacting:  # one at a time: a compaction holds a bucket's rows in memory
                self._compact(table, dt, buckets, info.sort_key)
        checkpoint = self._checkpoint(path, dt, info)
        dt.cleanup_metadata()
        vacuumed = dt.vacuum(
            retention_hours=self._config.file_retention_hours,
            dry_run=False,
            enforce_retention_duration=False,
            full=not has_deletion_vectors(dt),
            commit_properties=self._properties("vacuum"),
            post_commithook_properties=_NO_HOOKS,
        )
        dt.update_incremental()
        result = TableMaintenance(
            table,
            self._epoch,
            version_before,
            dt.version(),
            sum(map(len, sizes.values())),
            sum(map(len, _file_sizes(dt).values())),
            tuple(buckets),
            checkpoint,
            len(vacuumed),
            time.monotonic() - started,
        )
        log.info("maintenance table=%s epoch=%d %s", table, self._epoch, result)
        return result

    def _check_epoch(self, table: str, dt: DeltaTable, info: LakeCommitInfo) -> None:
        """Refuse when a newer term wrote to the table: its round (entry or txn) or its fence."""
        txn = dt.transaction_version(app_id(self._job, table))
        fence = fence_epoch(dt, self._job)
        newest = max(info.epoch, epoch_round(txn)[0] if txn is not None else -1, fence if fence is not None else -1)
        if newest > self._epoch:
            raise FencedEpochError(
                f"table {table!r}: epoch {newest} already wrote to the lake (Delta version {dt.version()}); "
                f"maintenance at epoch {self._epoch} refused",
                table=table,
                epoch=self._epoch,
            )

    def _to_compact(self, sizes: Mapping[int, list[int]]) -> list[int]:
        """The buckets holding at least ``min_files`` files smaller than the target."""
        target = self._config.target_file_mb * _MIB
        return sorted(b for b, files in sizes.items() if sum(s < target for s in files) >= self._config.min_files)

    def _set_properties(self, table: str, dt: DeltaTable, *, fence: bool) -> None:
        """The configured checkpoint interval and log retention, and (before a compaction) this
        term's fence, in one metadata commit when any differs from the table's."""
        wanted = {
            CHECKPOINT_INTERVAL_PROPERTY: str(self._config.checkpoint_interval),
            "delta.logRetentionDuration": f"interval {self._config.log_retention_hours} hours",
            # tombstones of replaced files live in every checkpoint this long (Delta's default is a
            # week): as long as vacuum keeps the files, no longer, or checkpoints keep growing
            "delta.deletedFileRetentionDuration": f"interval {self._config.file_retention_hours} hours",
        }
        if fence:
            wanted[fence_property(self._job)] = str(self._epoch)
        current = dt.metadata().configuration
        changed = {k: v for k, v in wanted.items() if current.get(k) != v}
        if changed:
            self._guarded(
                table,
                f"setting {sorted(changed)}",
                lambda: dt.alter.set_table_properties(
                    changed,
                    raise_if_not_exists=False,
                    commit_properties=self._properties("properties"),
                    post_commithook_properties=_NO_HOOKS,
                ),
            )

    def _compact(self, table: str, dt: DeltaTable, buckets: list[int], sort_key: str | None) -> None:
        """Rewrite ``buckets`` into files of about the target, sorted by ``sort_key`` when given."""
        optimize = dt.optimize
        what = f"compaction of buckets {buckets}"
        rewrite = optimize.compact if sort_key is None else partial(optimize.z_order, [sort_key])
        if sort_key is not None:
            what = f"sorted {what} by {sort_key!r}"
        self._guarded(
            table,
            what,
            lambda: rewrite(
                partition_filters=[(BUCKET_COLUMN, "in", [str(b) for b in buckets])],
                target_size=self._config.target_file_mb * _MIB,
                writer_properties=delta_rs_properties(self._lake.compression),
                commit_properties=self._properties("compact"),
                post_commithook_properties=_NO_HOOKS,
            ),
        )

    def _guarded(self, table: str, what: str, commit: Callable[[], object]) -> None:
        """``commit``, whose failure is a lost race: :class:`FencedEpochError` when a newer term
        won it, else :class:`LakeCommitError` (a later pass tries again)."""
        try:
            commit()
        except Exception as e:
            after = open_table(self._lake.path(table), self._lake.store.delta_options())
            info = newest_commit(after, table) if after is not None else None
            if after is not None and info is not None:
                self._check_epoch(table, after, info)
            raise LakeCommitError(
                f"table {table!r}: {what} lost to a concurrent commit, nothing of it landed: {e}",
                table=table,
                epoch=self._epoch,
            ) from e

    def _checkpoint(self, path: str, dt: DeltaTable, info: LakeCommitInfo) -> int | None:
        """A checkpoint at the newest round commit when ``checkpoint_interval`` commits passed
        since the last one (see the module doc for why only there)."""
        last = self._last_checkpoint(path)
        if dt.version() - max(last, 0) < self._config.checkpoint_interval or info.delta_version <= last:
            return None
        options = self._lake.store.delta_options()
        DeltaTable(path, version=info.delta_version, storage_options=options).create_checkpoint()
        return info.delta_version

    def _last_checkpoint(self, path: str) -> int:
        store = self._lake.store
        try:
            with store.filesystem.open_input_stream(store.path(f"{path}/_delta_log/_last_checkpoint")) as f:
                return int(json.loads(f.read())["version"])
        except FileNotFoundError:
            return -1

    def _properties(self, operation: str) -> CommitProperties:
        return CommitProperties(
            custom_metadata=maintenance_metadata(job=self._job, epoch=self._epoch, operation=operation)
        )


def _file_sizes(dt: DeltaTable) -> dict[int, list[int]]:
    """The sizes of the table's current data files, per bucket."""
    actions = pa.table(dt.get_add_actions(flatten=True))
    out: dict[int, list[int]] = {}
    for size, bucket in zip(
        actions.column("size_bytes").to_pylist(), actions.column(f"partition.{BUCKET_COLUMN}").to_pylist(), strict=False
    ):
        out.setdefault(int(bucket), []).append(int(size))
    return out
