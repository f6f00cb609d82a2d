"""The round committer driven with fakes: each table's states, a failure between every two of
them, and what is released, reported and deferred. The real round (store, Spark, Delta) is
covered by tests/integration/pipeline; here every step can be made to fail on demand."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from tests.support.tables import kv_table
from tiering.conf.loader import load_config
from tiering.context import TermContext
from tiering.coord.ownership import OwnedTables
from tiering.enumerator.splits import LogSplit, SnapshotSplit, Split
from tiering.errors import (
    BucketWriteError,
    ConflictError,
    FencedEpochError,
    LakeCommitError,
    RoundStateError,
    SchemaMismatchError,
    SnapshotUnavailableError,
    StoreUnavailableError,
    TableEpochFencedError,
    TableNotFoundError,
)
from tiering.kvstore.contract import LakeProgress, SnapshotRef, StoreTable, TableClaims, TableLog
from tiering.lease.holds import SnapshotHolds
from tiering.round.committer import RoundCommitter, other_job
from tiering.round.outcome import RoundOutcome
from tiering.round.table_round import TableRound
from tiering.round.table_states import FailureCause, TableFailure, TableState
from tiering.state.offset import TieringOffset
from tiering.writers.round_writer import TableCommit, WritePath

pytestmark = pytest.mark.unit

EPOCH = 4


def info(name: str, table_id: int) -> StoreTable:
    return kv_table({"id": "bigint"}, name=name, table_id=table_id, num_buckets=2)


#: Three tables: "a" bootstraps bucket 0 from snapshot 5 and applies bucket 1's log; "b" and "c" apply logs.
SPLITS: tuple[Split, ...] = (
    SnapshotSplit("a", 0, 1, 5, 10),
    LogSplit("a", 0, 1, 10, 12),
    LogSplit("a", 1, 1, 0, 3),
    LogSplit("b", 0, 2, 0, 4),
    LogSplit("c", 1, 3, 2, 9),
)
TABLES = {"a": info("a", 1), "b": info("b", 2), "c": info("c", 3)}
#: The reader a store without files hands the round (any picklable value stands for one here).
READER = "the store's bucket reader"


def refs(held) -> list[tuple[int, int, int]]:
    """Snapshots as (table_id, bucket, snapshot_id): what identifies a hold, whatever carries it."""
    return [(r.table_id, r.bucket, r.snapshot_id) for r in held]


@dataclass
class Prepared:
    """What the fake writer hands from ``prepare`` to ``commit``."""

    table: StoreTable
    splits: tuple[Split, ...]


@dataclass
class FakeWriter:
    """A round writer whose steps fail on demand, per table: ``fail[(step, table)] = error``."""

    fail: dict[tuple[str, str], Exception] = field(default_factory=dict)
    replayed: set[str] = field(default_factory=set)
    committed: list[str] = field(default_factory=list)
    while_writing: Callable[[], None] = lambda: None
    #: table -> the files and the reader its prepare was given
    inputs: dict[str, tuple[dict, object]] = field(default_factory=dict)

    def _maybe_fail(self, step: str, table: str) -> None:
        if (step, table) in self.fail:
            raise self.fail[(step, table)]

    def prepare(
        self, table: StoreTable, splits, files, current, *, epoch, round_id, lease_id, replace_table=False, reader=None
    ):
        self._maybe_fail("prepare", table.name)
        self.inputs[table.name] = (dict(files), reader)
        assert reader is not None or set(files) == set(splits), "every split's files are resolved"
        if table.name in self.replayed:
            return commit_of(table.name, skipped=True)
        return Prepared(table, tuple(splits))

    def tasks(self, prepared: Prepared) -> list:
        return [prepared.table.name]

    def write_files(self, tasks) -> dict:
        if ("write_files", "*") in self.fail:
            raise self.fail[("write_files", "*")]
        self.while_writing()
        return {name: [f"result of {name}"] for name in tasks}

    def written_files(self, prepared: Prepared, results) -> list:
        self._maybe_fail("written_files", prepared.table.name)
        assert results == [f"result of {prepared.table.name}"]
        return []

    def commit(self, prepared: Prepared, written) -> TableCommit:
        self._maybe_fail("commit", prepared.table.name)
        self.committed.append(prepared.table.name)
        return commit_of(prepared.table.name)


def commit_of(table: str, skipped: bool = False) -> TableCommit:
    table_id = TABLES[table].table_id
    return TableCommit(
        table=table,
        table_id=table_id,
        delta_version=3,
        positions={0: 12, 1: 9},
        skipped=skipped,
        written_by=WritePath.DRIVER,
    )


@dataclass
class FakeStore:
    """The store seam's calls a round makes, each able to fail: ``fail[call] = error``, or only its
    ``n``-th call: ``fail[f"{call}#{n}"]``, or one table's answer: ``fail[f"{call}:{table}"]``.
    ``has_files`` False: a store read only through its reader (Fluss); ``takes_reports`` False:
    one that takes no lake report."""

    tables_by_name: dict[str, StoreTable] = field(default_factory=lambda: dict(TABLES))
    listed_after: dict[str, StoreTable] | None = None
    fail: dict[str, Exception] = field(default_factory=dict)
    reports: list[tuple[str, LakeProgress]] = field(default_factory=list)
    #: table -> the job whose lake report the store holds (absent: none)
    holders: dict[str, str] = field(default_factory=dict)
    has_files: bool = True
    takes_reports: bool = True
    listings: int = 0
    calls: dict[str, int] = field(default_factory=dict)

    def _maybe_fail(self, call: str) -> None:
        self.calls[call] = self.calls.get(call, 0) + 1
        for key in (call, f"{call}#{self.calls[call]}"):
            if key in self.fail:
                raise self.fail[key]

    def with_retry_deadline(self, seconds: float) -> FakeStore:
        assert 0 < seconds <= 30, "a table's calls give up sooner than the round's"
        return self

    def tables(self) -> list[StoreTable]:
        self.listings += 1
        if self.listings > 1 and self.listed_after is not None:
            return list(self.listed_after.values())
        return list(self.tables_by_name.values())

    def log_ends(self, tables: list[str]) -> dict[str, TableLog]:
        self._maybe_fail("log_ends")
        return {
            t: TableLog(self.tables_by_name[t].table_id, {}, self._reported(t))
            for t in tables
            if t in self.tables_by_name
        }

    def _reported(self, table: str) -> LakeProgress | None:
        holder = self.holders.get(table)
        return LakeProgress(self.tables_by_name[table].table_id, 1, 1, {}, job=holder) if holder else None

    @property
    def files(self) -> FakeStore | None:
        return self if self.has_files else None

    def snapshot_files(self, table: str, ref: SnapshotRef) -> list[str]:
        self.calls["snapshot_files"] = self.calls.get("snapshot_files", 0) + 1
        return [f"{table}/{ref.bucket}/{ref.snapshot_id}.parquet"]

    def log_files(self, ranges: dict) -> dict:
        """``fail["log_files"]`` fails the call; ``fail["log_files:<table>"]`` is that table's answer."""
        self._maybe_fail("log_files")
        return {
            table: self.fail.get(f"log_files:{table}") or [[f"{table}/{bucket}.log"] for bucket, _, _ in wanted]
            for table, wanted in ranges.items()
        }

    def bucket_reader(self) -> str:
        return READER

    @property
    def lake_progress(self) -> FakeStore | None:
        return self if self.takes_reports else None

    def report(self, progress: dict[str, LakeProgress]) -> dict:
        """``fail["report"]`` fails the call; ``fail["report:<table>"]`` is that table's answer."""
        self._maybe_fail("report")
        answers = {}
        for table, report in progress.items():
            answers[table] = self.fail.get(f"report:{table}")
            if answers[table] is None:
                self.reports.append((table, report))
        return answers


@dataclass
class FakeLease:
    """The job lease: what is acquired and released, each call able to fail."""

    gone: list = field(default_factory=list)
    fail: dict[str, Exception] = field(default_factory=dict)
    acquired: list = field(default_factory=list)
    released: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)
    lease_id: str = "lease-1"
    calls: int = 0
    #: (table_id, table_epoch) the store has seen a higher table epoch for: a claim of one is refused
    moved: set[tuple[int, int]] = field(default_factory=set)
    claims: list[TableClaims | None] = field(default_factory=list)

    def acquire(self, refs: list, owners: TableClaims | None = None) -> list:
        """Refused whole, as the store does, when ``owners`` claims a table of ``moved``."""
        if "acquire" in self.fail:
            raise self.fail["acquire"]
        claimed = set(owners.table_epochs.items()) if owners is not None else set()
        if claimed & self.moved:
            raise TableEpochFencedError(f"acquire at {sorted(claimed)} refused: moved", code="TABLE_EPOCH_FENCED")
        self.acquired.extend(refs)
        self.claims.append(owners)
        return [ref for ref in self.gone if ref in refs]

    def release(self, held: dict[int, list[int]]) -> None:
        """``fail["release"]`` refuses the next call once."""
        self.calls += 1
        if "release" in self.fail:
            raise self.fail.pop("release")
        self.released.extend((table_id, tuple(buckets)) for table_id, buckets in sorted(held.items()))


class Round:
    """A committer over the fakes, and the outcomes of the rounds it ran."""

    def __init__(
        self,
        tmp_path,
        writer: FakeWriter | None = None,
        store: FakeStore | None = None,
        lease: FakeLease | None = None,
        owned: OwnedTables | None = None,
    ) -> None:
        self.checkpoint = tmp_path / "ckpt"
        group = {"job.group": owned.group} if owned is not None else {}
        config = load_config(
            None,
            env={},
            overrides={
                "job.name": "unit",
                "job.checkpoint": str(self.checkpoint),
                "kvstore.url": "http://127.0.0.1:9",
                "zookeeper.hosts": "127.0.0.1:9",
                "lake.root": str(tmp_path / "lake"),
                **group,
            },
        )
        group_file = None
        if owned is not None:
            group_file = str(tmp_path / "group-ownership.json")
            owned.write(tmp_path / "group-ownership.json")
        self.writer, self.store, self.lease = writer or FakeWriter(), store or FakeStore(), lease or FakeLease()
        self.outcomes: list[RoundOutcome] = []
        self.releases = SnapshotHolds(self.lease)
        self.committer = RoundCommitter(
            self.writer,
            TermContext(config=config, epoch=EPOCH, lease_id="lease-1", group_file=group_file),
            self.store,
            self.releases,
            on_round=self.outcomes.append,
        )

    def run(self, batch_id: int, splits: tuple[Split, ...] = SPLITS) -> RoundOutcome:
        """Round ``batch_id + 1`` with ``splits``, its offset in the offsets log as Spark writes it."""
        offset = TieringOffset("lease-1", EPOCH, batch_id + 1, splits)
        (self.checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
        (self.checkpoint / "offsets" / str(batch_id)).write_text('v1\n{"batchWatermarkMs":0}\n' + offset.to_json())
        self.committer(None, batch_id)
        return self.outcomes[-1]


def releases_of(lease: FakeLease) -> dict[int, list[tuple[int, ...]]]:
    out: dict[int, list[tuple[int, ...]]] = {}
    for table_id, buckets in lease.released:
        out.setdefault(table_id, []).append(buckets)
    return out


def test_a_clean_round_commits_reports_and_releases_each_table_once(tmp_path):
    r = Round(tmp_path)
    outcome = r.run(0)

    assert sorted(outcome.committed) == ["a", "b", "c"] and outcome.failed == {}
    assert refs(r.lease.acquired) == [(1, 0, 5)], "one acquire, the round's snapshots"
    assert releases_of(r.lease) == {1: [(0,)]} and r.lease.calls == 1, "one release for the round, the leased buckets"
    assert r.store.calls == {"log_ends": 2, "log_files": 1, "snapshot_files": 1, "report": 1}, (
        "one store call per step for every table (the holders, the log files, the reports, the lags)"
    )
    assert [(t, rep.epoch, rep.lake_version, rep.offsets, rep.job) for t, rep in r.store.reports] == [
        (t, EPOCH, 3, {0: 12, 1: 9}, "unit") for t in ("a", "b", "c")
    ], "each report names the job"
    assert outcome.lag == {"a": 0, "b": 0, "c": 0} and outcome.unreported == set()
    assert r.store.listings == 1, "no listing for dropped tables when nothing failed"


def test_a_store_without_files_hands_its_reader_to_every_table_and_is_asked_for_no_files(tmp_path):
    r = Round(tmp_path, store=FakeStore(has_files=False))
    outcome = r.run(0)

    assert sorted(outcome.committed) == ["a", "b", "c"] and outcome.failed == {}
    assert r.writer.inputs == {t: ({}, READER) for t in ("a", "b", "c")}, "no files; the plans read through it"
    assert "log_files" not in r.store.calls and "snapshot_files" not in r.store.calls


def test_a_store_with_files_hands_every_split_its_files_and_no_reader(tmp_path):
    r = Round(tmp_path)
    r.run(0)

    files, reader = r.writer.inputs["a"]
    assert reader is None and files == {
        SPLITS[0]: ["a/0/5.parquet"],
        SPLITS[1]: ["a/0.log"],
        SPLITS[2]: ["a/1.log"],
    }


def test_a_store_that_takes_no_lake_report_is_neither_asked_for_holders_nor_sent_reports(tmp_path):
    store = FakeStore(takes_reports=False, holders={"a": "other"}, fail={"report": AssertionError("no report")})
    r = Round(tmp_path, store=store)
    outcome = r.run(0)
    r.run(1, (LogSplit("b", 0, 2, 4, 6),))

    assert sorted(outcome.committed) == ["a", "b", "c"] and outcome.failed == {} and outcome.unreported == set()
    assert store.reports == [] and store.calls["log_ends"] == 2, "only the lags, once a round"
    assert releases_of(r.lease) == {1: [(0,)]} and outcome.lag == {"a": 0, "b": 0, "c": 0}


@pytest.mark.parametrize(
    "step, error, cause, state",
    [
        ("prepare", SchemaMismatchError("column 'x' is int in Delta"), FailureCause.SCHEMA, TableState.ACQUIRED),
        ("prepare", StoreUnavailableError("store down"), FailureCause.STORE, TableState.ACQUIRED),
        ("written_files", BucketWriteError("bucket 0: AccessDenied"), FailureCause.FILES, TableState.PREPARED),
        ("commit", LakeCommitError("conflict"), FailureCause.COMMIT, TableState.WRITTEN),
        ("commit", ValueError("a bug"), FailureCause.INTERNAL, TableState.WRITTEN),
    ],
)
def test_a_failure_before_the_commit_fails_that_table_alone_with_its_typed_cause(tmp_path, step, error, cause, state):
    r = Round(tmp_path, writer=FakeWriter(fail={(step, "a"): error}))
    outcome = r.run(0)

    assert outcome.failed == {"a": TableFailure(cause, state, type(error).__name__, str(error))}
    assert sorted(outcome.committed) == ["b", "c"] and "a" not in r.writer.committed
    assert releases_of(r.lease) == {1: [(0,)]}, "the failed table's leased bucket released once"
    assert [t for t, _ in r.store.reports] == ["b", "c"]


def test_the_store_refusing_one_tables_log_files_fails_that_table_alone(tmp_path):
    r = Round(tmp_path, store=FakeStore(fail={"log_files:b": SnapshotUnavailableError("log truncated", status=410)}))
    outcome = r.run(0)

    assert (outcome.failed["b"].cause, outcome.failed["b"].state) == (FailureCause.SNAPSHOT_GONE, TableState.ACQUIRED)
    assert sorted(outcome.committed) == ["a", "c"] and r.store.calls["log_files"] == 1


def test_the_log_files_call_failing_fails_every_table_that_reads_the_log(tmp_path):
    outcome = Round(tmp_path, store=FakeStore(fail={"log_files": StoreUnavailableError("store down")})).run(0)

    assert {t: f.cause for t, f in outcome.failed.items()} == {t: FailureCause.STORE for t in ("a", "b", "c")}
    assert outcome.committed == {}


def test_a_table_another_jobs_lake_report_holds_fails_alone_before_anything_is_written(tmp_path):
    store = FakeStore(holders={"a": "other", "b": "unit"})  # "b" is this job's own, "c" has no report yet
    r = Round(tmp_path, store=store)
    outcome = r.run(0)

    failure = outcome.failed["a"]
    assert (failure.cause, failure.state, failure.error_type) == (
        FailureCause.STORE,
        TableState.ACQUIRED,
        "ConflictError",
    )
    assert "table 'a' is tiered by job 'other'" in failure.message and "job 'unit' writes nothing" in failure.message
    assert sorted(outcome.committed) == ["b", "c"] and "a" not in r.writer.committed
    assert [t for t, _ in store.reports] == ["b", "c"] and releases_of(r.lease) == {1: [(0,)]}


def test_the_holders_call_failing_fails_every_table_like_its_other_calls(tmp_path):
    outcome = Round(tmp_path, store=FakeStore(fail={"log_ends#1": StoreUnavailableError("store down")})).run(0)

    assert {t: f.cause for t, f in outcome.failed.items()} == {t: FailureCause.STORE for t in ("a", "b", "c")}


def test_a_snapshot_gone_before_it_was_read_fails_its_table(tmp_path):
    r = Round(tmp_path, lease=FakeLease(gone=[SPLITS[0].ref]))
    outcome = r.run(0)

    assert (outcome.failed["a"].cause, outcome.failed["a"].state) == (FailureCause.SNAPSHOT_GONE, TableState.ACQUIRED)
    assert sorted(outcome.committed) == ["b", "c"]


def test_a_dropped_or_recreated_table_fails_with_that_cause(tmp_path):
    store = FakeStore(tables_by_name={"a": info("a", 11), "c": TABLES["c"]})  # "a" re-created, "b" dropped
    outcome = Round(tmp_path, store=store).run(0)

    assert {t: f.cause for t, f in outcome.failed.items()} == {"a": FailureCause.RECREATED, "b": FailureCause.DROPPED}
    assert outcome.dropped == {"b"}


def test_a_table_failing_for_another_reason_is_found_dropped_by_one_listing_after_the_round(tmp_path):
    store = FakeStore(listed_after={"b": TABLES["b"], "c": TABLES["c"]})
    outcome = Round(tmp_path, writer=FakeWriter(fail={("commit", "a"): LakeCommitError("file gone")}), store=store).run(
        0
    )

    assert outcome.failed["a"].cause is FailureCause.DROPPED and outcome.dropped == {"a"}
    assert outcome.failed["a"].message == "file gone" and store.listings == 2


def test_a_refused_report_after_the_commit_keeps_the_table_committed_and_is_sent_next_round(tmp_path):
    store = FakeStore(fail={"report:a": StoreUnavailableError("store blip")})
    r = Round(tmp_path, store=store)
    outcome = r.run(0)

    assert "a" in outcome.committed and outcome.failed == {} and outcome.unreported == {"a"}
    assert releases_of(r.lease)[1] == [(0,)], "released once all the same"
    assert [t for t, _ in store.reports] == ["b", "c"]

    del store.fail["report:a"]
    second = r.run(1, (LogSplit("b", 0, 2, 4, 6),))
    assert [t for t, _ in store.reports] == ["b", "c", "a", "b"], "the deferred report first, then the round's"
    assert second.unreported == set() and releases_of(r.lease)[1] == [(0,)], "nothing released twice"


def test_a_report_another_job_holds_the_table_for_is_sent_once_more_then_dropped_not_retried_forever(tmp_path):
    other = ConflictError("table 'a' is tiered by job 'other'", code="OTHER_JOB", status=409, table="a")
    store = FakeStore(fail={"report:a": other})
    r = Round(tmp_path, store=store)
    assert r.run(0).unreported == {"a"}

    r.run(1, (LogSplit("b", 0, 2, 4, 6),))
    r.run(2, (LogSplit("b", 0, 2, 6, 8),))
    assert store.calls["report"] == 4, "rounds 0 and 1 send a's report, round 2 no longer"
    assert [t for t, _ in store.reports] == ["b", "c", "b", "b"]


def test_a_report_refused_because_the_table_moved_is_superseded_neither_deferred_nor_failed(tmp_path, caplog):
    fenced = TableEpochFencedError("job 'x' owns the table at table epoch 9", code="TABLE_EPOCH_FENCED", status=409)
    store = FakeStore(fail={"report:a": fenced, "report:b": StoreUnavailableError("store blip")})
    r = Round(tmp_path, store=store, owned=OwnedTables("g", "unit", {"a": 3, "b": 3, "c": 3}))
    caplog.set_level(logging.INFO, logger="tiering.round")
    outcome = r.run(0)

    assert sorted(outcome.committed) == ["a", "b", "c"] and outcome.failed == {}
    assert outcome.unreported == {"b"}, "a moved table's report is not deferred"
    assert any("Delta version 3 committed; its lake report is superseded" in m for m in caplog.messages)

    store.fail["report:b"] = fenced  # b moved before its deferred report went out
    r.run(1, (LogSplit("c", 1, 3, 9, 11),))
    r.run(2, (LogSplit("c", 1, 3, 11, 12),))
    assert store.calls["report"] == 4, "rounds 0 and 1 send b's report, round 2 no longer"
    assert [t for t, _ in store.reports] == ["c", "c", "c"]
    assert any("superseded, not sent again" in m and m.startswith("table=b") for m in caplog.messages)


def test_a_table_dropped_after_its_commit_is_committed_and_dropped_not_failed(tmp_path):
    r = Round(tmp_path, store=FakeStore(fail={"report:b": TableNotFoundError("table 'b' does not exist")}))
    outcome = r.run(0)

    assert sorted(outcome.committed) == ["a", "b", "c"] and outcome.failed == {} and outcome.dropped == {"b"}
    assert outcome.unreported == set() and "b" not in outcome.lag and releases_of(r.lease) == {1: [(0,)]}
    r.run(1, (LogSplit("c", 1, 3, 9, 10),))
    assert [t for t, _ in r.store.reports] == ["a", "c", "c"], "nothing deferred for a dropped table"


def test_a_refused_release_after_the_commit_is_sent_once_next_round(tmp_path):
    lease = FakeLease(fail={"release": StoreUnavailableError("store blip")})
    r = Round(tmp_path, lease=lease)
    outcome = r.run(0)

    assert "a" in outcome.committed and outcome.failed == {}
    assert 1 not in releases_of(lease)
    r.run(1, (LogSplit("b", 0, 2, 4, 6),))
    assert releases_of(lease)[1] == [(0,)]


def test_a_refused_release_of_a_bucket_the_next_round_holds_again_is_not_sent_over_its_new_hold(tmp_path):
    lease = FakeLease(fail={"release": StoreUnavailableError("store blip")})
    r = Round(tmp_path, lease=lease)
    r.run(0)
    r.run(1, (SnapshotSplit("a", 0, 1, 6, 12),))  # bucket 0 of "a" bootstraps again, from snapshot 6

    assert releases_of(lease)[1] == [(0,)], "released once, by the round that holds it now"


def test_a_snapshot_found_gone_when_a_lapsed_lease_is_held_again_fails_its_table_before_the_commit(tmp_path):
    """The renewer found the lease lapsed mid-round and acquired the round's snapshots again:
    one was collected meanwhile, and the table that read it must not commit what it read."""
    lease = FakeLease()
    r = Round(tmp_path, lease=lease)

    def lapse_while_writing() -> None:
        lease.gone = [SPLITS[0].ref]
        r.releases.after_renewal(False)

    r.writer.while_writing = lapse_while_writing
    outcome = r.run(0)

    assert outcome.failed["a"].cause is FailureCause.SNAPSHOT_GONE and "lease lapsed" in str(outcome.failed["a"])
    assert "a" not in r.writer.committed and sorted(outcome.committed) == ["b", "c"]
    assert refs(lease.acquired).count((1, 0, 5)) == 2, "held again at the lapse"
    assert releases_of(lease)[1] == [(0,)], "the failed table's bucket released once"


def test_an_unknown_lag_does_not_fail_a_committed_table(tmp_path):
    outcome = Round(tmp_path, store=FakeStore(fail={"log_ends#2": StoreUnavailableError("slow")})).run(0)

    assert sorted(outcome.committed) == ["a", "b", "c"] and outcome.failed == {}
    assert outcome.lag == {} and outcome.unreported == set()


def test_a_replayed_table_is_committed_without_a_commit_and_reported_again(tmp_path):
    r = Round(tmp_path, writer=FakeWriter(replayed={"a"}))
    outcome = r.run(0)

    assert outcome.committed["a"].skipped and "a" not in r.writer.committed
    assert [t for t, _ in r.store.reports] == ["a", "b", "c"] and releases_of(r.lease)[1] == [(0,)]


def test_a_table_that_moved_since_planning_is_refused_at_the_re_acquire_and_fails_alone(tmp_path):
    splits = (*SPLITS, SnapshotSplit("b", 1, 2, 6, 4), SnapshotSplit("c", 0, 3, 7, 2))
    owned = OwnedTables("g", "unit", {"a": 3, "b": 5, "c": 2})
    lease = FakeLease(moved={(1, 3), (3, 2)})  # another member owns a and c at higher table epochs now
    r = Round(tmp_path, lease=lease, owned=owned)
    outcome = r.run(0, splits)

    assert {t: (f.cause, f.state, f.error_type) for t, f in outcome.failed.items()} == {
        t: (FailureCause.MOVED, TableState.PLANNED, "TableEpochFencedError") for t in ("a", "c")
    }
    assert sorted(outcome.committed) == ["b"] and r.writer.committed == ["b"]
    assert refs(lease.acquired) == [(2, 1, 6)], "only b's snapshot is held"
    assert lease.claims[-1] == TableClaims("g", "unit", {2: 5})
    assert releases_of(lease) == {1: [(0,)], 3: [(0,)], 2: [(1,)]}, "each table's leased buckets released once"
    assert [(t, rep.table_epoch) for t, rep in r.store.reports] == [("b", 5)]


def test_a_table_given_away_mid_round_whose_commit_fails_failed_because_it_moved(tmp_path):
    """The leader gave "a" away while the round wrote it, and its commit failed (the new owner
    created the Delta table first): a move, not a failure; "b" fails as it would outside a group."""
    exists = LakeCommitError("table 'a': A Delta Lake table already exists at that location")
    r = Round(
        tmp_path,
        writer=FakeWriter(fail={("commit", "a"): exists, ("commit", "b"): LakeCommitError("disk full")}),
        owned=OwnedTables("g", "unit", {"a": 3, "b": 5, "c": 2}),
    )
    r.writer.while_writing = lambda: OwnedTables("g", "unit", {"b": 5, "c": 2}).write(tmp_path / "group-ownership.json")
    outcome = r.run(0)

    assert {t: (f.cause, f.error_type) for t, f in outcome.failed.items()} == {
        "a": (FailureCause.MOVED, "TableMovedError"),
        "b": (FailureCause.COMMIT, "LakeCommitError"),
    }
    assert "already exists" in str(outcome.failed["a"]) and sorted(outcome.committed) == ["c"]


def test_outside_a_group_the_re_acquire_claims_no_table(tmp_path):
    r = Round(tmp_path)
    r.run(0)
    assert r.lease.claims == [None]


def test_a_lost_term_stops_the_round_and_releases_nothing(tmp_path):
    r = Round(tmp_path, writer=FakeWriter(fail={("commit", "b"): FencedEpochError("newer term", epoch=EPOCH)}))
    with pytest.raises(FencedEpochError):
        r.run(0)

    assert r.outcomes == [] and 2 not in releases_of(r.lease), "the new leader owns the holds"


@pytest.mark.parametrize("where", ["acquire", "write_files"])
def test_an_aborted_round_releases_every_table_not_yet_released_and_raises(tmp_path, where):
    error = StoreUnavailableError("store down") if where == "acquire" else RuntimeError("executors lost")
    lease = FakeLease(fail={"acquire": error} if where == "acquire" else {})
    writer = FakeWriter(fail={("write_files", "*"): error} if where == "write_files" else {})
    r = Round(tmp_path, writer=writer, lease=lease)
    with pytest.raises(type(error)):
        r.run(0)

    assert r.outcomes == [] and r.store.reports == []
    assert releases_of(lease) == {1: [(0,)], 2: [()], 3: [()]}, "each table released once (failed over)"


def test_a_table_takes_only_the_steps_of_a_round():
    table = TableRound("t", (LogSplit("t", 0, 1, 0, 1),))
    with pytest.raises(RoundStateError, match="no step from planned to committed"):
        table.advance(TableState.COMMITTED)
    table.advance(TableState.ACQUIRED)
    table.committed_as(commit_of("a", skipped=True))
    with pytest.raises(RoundStateError, match="no step from committed to failed"):
        table.fail(LakeCommitError("late"))
    assert table.state is TableState.COMMITTED and table.failure is None


def test_the_jobs_own_refusal_of_a_table_names_the_table_the_holder_and_the_way_out():
    error = other_job("a/b", "second", "first")
    assert type(error) is ConflictError and (error.code, error.status, error.table) == ("OTHER_JOB", 409, "a/b")
    assert all(part in str(error) for part in ("'a/b'", "job 'first'", "job 'second'", "DELETE /v1/tables/a%2Fb/lake"))
