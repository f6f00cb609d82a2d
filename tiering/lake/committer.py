"""Commits one round (one micro-batch of split descriptors) to the lake, table by table.

Failure modes and what happens:
- a table fails (schema mismatch, snapshot gone, I/O): its leased buckets are released, the
  failure is recorded, and the other tables still commit; the table is re-planned next round
  from its lake position, which did not move;
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
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from tiering import failpoints
from tiering.context import TermContext
from tiering.enumerator.descriptor import DESCRIPTOR_COLUMNS, from_descriptor
from tiering.enumerator.positions import LakePosition
from tiering.enumerator.splits import SnapshotSplit, Split
from tiering.errors import NotLeaderError, SnapshotUnavailableError, TieringError
from tiering.kvstore.client import KvStoreClient
from tiering.kvstore.models import LakeReport, SnapshotRef
from tiering.lake.round_protocol import RoundWriter, TableCommit
from tiering.lakestate.lake import LakeTables
from tiering.lakestate.replay import missing_splits
from tiering.lease.release import LeaseReleases

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

    def __call__(self, batch_df, batch_id: int) -> None:
        rows = batch_df.select(*DESCRIPTOR_COLUMNS).collect()
        by_table: dict[str, list[Split]] = defaultdict(list)
        round_id = -1
        for row in rows:
            split, round_id = from_descriptor(row)
            by_table[split.table].append(split)
        outcome = RoundOutcome(round_id, self._context.epoch)
        unsettled = {splits[0].table_id: _leased_buckets(splits) for splits in by_table.values()}
        try:
            for table in sorted(by_table):
                self._commit_table(table, by_table[table], round_id, outcome)
                unsettled.pop(by_table[table][0].table_id)
        except NotLeaderError:
            raise
        except BaseException:
            self._releases.failed_over(unsettled)
            raise
        self._on_round(outcome)

    def _commit_table(self, table: str, splits: list[Split], round_id: int, outcome: RoundOutcome) -> None:
        started = time.monotonic()
        table_id = splits[0].table_id
        leased = _leased_buckets(splits)
        try:
            commit = self._write(table, splits, round_id)
        except NotLeaderError:
            raise
        except Exception as e:  # one table's failure must not stop the others
            outcome.failed[table] = f"{type(e).__name__}: {e}"
            log.error("round=%d table=%s FAILED epoch=%d: %s (re-planned next round)", round_id, table, self._context.epoch, e)
            self._releases.failed(table_id, leased)
            return
        self._releases.finished(table_id, leased)
        outcome.committed[table] = commit
        outcome.lag[table] = LakePosition(table_id, commit.positions).lag(self._client.log_info(table).buckets)
        log.info(
            "round=%d table=%s table_id=%d epoch=%d lease=%s splits=%d %s offsets=%s lag=%d in %.2fs",
            round_id, table, table_id, self._context.epoch, self._context.lease_id, len(splits), commit,
            dict(sorted(commit.positions.items())), outcome.lag[table], time.monotonic() - started,
        )

    def _write(self, table: str, splits: list[Split], round_id: int) -> TableCommit:
        current = self._lake.load(table)  # the table's one read of this round
        position = current.position() if current is not None else None
        todo = missing_splits(splits, position)
        info = self._client.get_table(table)
        if info.table_id != splits[0].table_id:
            raise TieringError(f"table {table!r} was re-created (table_id {splits[0].table_id} -> {info.table_id})", table=table)
        files = self._resolve_files(table, todo)
        self._fence()
        failpoints.hit("before_delta_commit")
        commit = self._writer.write_table_round(
            info,
            todo,
            files,
            current,
            epoch=self._context.epoch,
            round_id=round_id,
            lease_id=self._context.lease_id,
            replace_table=position is not None and not position.belongs_to(info.table_id),
        )
        failpoints.hit("after_delta_commit")
        self._report(table, info.table_id, commit)
        failpoints.hit("after_store_report")
        return commit

    def _resolve_files(self, table: str, splits: list[Split]) -> dict[Split, list[str]]:
        snapshots = [s for s in splits if isinstance(s, SnapshotSplit)]
        if snapshots:
            refs = [SnapshotRef(table_id=s.table_id, bucket=s.bucket, snapshot_id=s.snapshot_id) for s in snapshots]
            gone = self._releases.lease.acquire(refs)
            if gone:
                raise SnapshotUnavailableError(f"table {table!r}: snapshots gone before they were read: {gone}", table=table)
        files: dict[Split, list[str]] = {}
        for split in splits:
            if isinstance(split, SnapshotSplit):
                files[split] = list(self._client.get_snapshot(table, split.bucket, split.snapshot_id).files)
            else:
                segments = self._client.log_segments(table, split.bucket, split.start_offset, split.end_offset)
                files[split] = [seg.file for seg in segments]
        return files

    def _report(self, table: str, table_id: int, commit: TableCommit) -> None:
        if commit.delta_version < 0:
            return  # nothing of this table is in the lake yet
        buckets = {str(b): offset for b, offset in sorted(commit.positions.items())}
        self._client.report_lake(
            table, LakeReport(table_id=table_id, epoch=self._context.epoch, lake_version=commit.delta_version, buckets=buckets)
        )


def _leased_buckets(splits: list[Split]) -> list[int]:
    """The buckets whose snapshot the lease holds for this round."""
    return sorted({s.bucket for s in splits if isinstance(s, SnapshotSplit)})
