"""The lake's progress told to Apache Fluss, where ``[kvstore] report_lake_progress`` asks for it:
per table the lake's snapshot id (the Delta version) and each bucket's exclusive log offset tiered,
which Fluss then shows as the table's lake snapshot (``Admin.getLatestLakeSnapshot``, pyfluss's
``get_latest_lake_snapshot``). The :class:`~tiering.kvstore.contract.LakeProgressReport` of
:class:`~tiering.fluss.store.FlussStore`.

Fluss takes it only through its coordinator's internal calls (``prepareLakeTableSnapshot``, then
``commitLakeTableSnapshot``, as its own Flink tiering committer makes them), which our
``LakeSnapshotReport`` (jvm/fluss-snapshot-source) builds: internal API, hence off by default.

Failure modes it guards against:
- a report failing the round whose commit it reports: every failure (the coordinator unreachable,
  our jar missing from the JVM, a Fluss release whose internal messages changed) is returned as
  each table's ``StoreError``, one attempt, never raised; the round logs one WARNING per table and
  sends the report again next round (:mod:`tiering.round.deferred`);
- a report of an old term after a newer one's, in this process: Fluss's report carries no epoch, so
  the epoch is checked here (the highest seen; a lower one is ``FencedEpochError``), as the lease's
  is. Another process's stale report is not refused by Fluss: it shows older progress until the
  live term's next report. Nothing plans from what Fluss shows (``TableLog.reported`` stays None):
  the lake's own positions decide what a round reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tiering.errors import FencedEpochError, StoreError, StoreUnavailableError, TableNotFoundError, one_line
from tiering.fluss.jvm import FlussJvm, has_class, snapshot_source_hint
from tiering.kvstore.contract import LakeProgress

__all__ = ["FlussLakeProgress"]

_REPORT = "kvtiering.fluss.lake.LakeSnapshotReport"
_TABLE_NOT_EXIST = "org.apache.fluss.exception.TableNotExistException"
_RETRIABLE = "org.apache.fluss.exception.RetriableException"


class FlussLakeProgress:
    """Reports one Fluss database's tables to its coordinator, through the JVM ``java()`` gives
    (the store's, made on first use)."""

    def __init__(self, java: Callable[[], FlussJvm], database: str) -> None:
        self._java = java
        self._database = database
        self._epoch = -1

    def report(self, progress: Mapping[str, LakeProgress]) -> dict[str, StoreError | None]:
        if not progress:
            return {}
        epoch = max(p.epoch for p in progress.values())
        if epoch < self._epoch:
            raise FencedEpochError(f"lake report of epoch {epoch}: this process reported under {self._epoch}")
        self._epoch = epoch
        try:
            return self._sent(progress)
        except Exception as e:  # the round's commits stand: the failure is each table's, sent again
            return {table: StoreError(f"Fluss lake report: {one_line(e)[:300]}", table=table) for table in progress}

    def _sent(self, progress: Mapping[str, LakeProgress]) -> dict[str, StoreError | None]:
        java = self._java()
        if not has_class(java.gateway, _REPORT):
            raise StoreError(f"the JVM reporting to Fluss has no {_REPORT}: {snapshot_source_hint(java.owned)}")
        report = java.jvm.kvtiering.fluss.lake.LakeSnapshotReport(self._database)
        for table, p in progress.items():
            buckets, offsets = _arrays(java, p.offsets)
            report.add(table, p.table_id, p.lake_version, buckets, offsets)
        answers, failure = java.outcome(report.send(java.connection))
        if failure is not None:
            raise _refusal(java, failure, None)
        return {
            table: None if refusal is None else _refusal(java, refusal, table)
            for table, refusal in zip(progress, answers, strict=True)
        }


def _arrays(java: FlussJvm, offsets: Mapping[int, int]) -> tuple[object, object]:
    """``offsets`` as an ``int[]`` of buckets and a ``long[]`` of offsets, in bucket order."""
    buckets = java.gateway.new_array(java.jvm.int, len(offsets))
    ends = java.gateway.new_array(java.jvm.long, len(offsets))
    for i, (bucket, offset) in enumerate(sorted(offsets.items())):
        buckets[i] = bucket
        ends[i] = offset
    return buckets, ends


def _refusal(java: FlussJvm, throwable: object, table: str | None) -> StoreError:
    """Fluss's refusal as the seam's error, naming ``table`` (None: the whole report's)."""
    kinds, text = java.failure_kinds(throwable)
    message = (
        f"Fluss at {java.bootstrap_servers}: lake report" + (f" of table {table!r}" if table else "") + f": {text}"
    )
    if _TABLE_NOT_EXIST in kinds:
        return TableNotFoundError(message, code="TABLE_NOT_FOUND", table=table)
    kind = StoreUnavailableError if _RETRIABLE in kinds else StoreError
    return kind(message, table=table)
