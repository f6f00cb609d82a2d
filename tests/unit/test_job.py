"""The leader loop's pure decisions (tiering.job): which tables a job tiers, when a run is ok,
whether a failed query means the term was lost (a LeadershipLostError) or is an error of its own,
and which tables the rounds hand to the term's maintainer."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pyarrow as pa
import pytest

from tiering.conf.loader import load_config
from tiering.context import TermContext
from tiering.errors import LeadershipLostError, NotLeaderError, TieringError
from tiering.job import (
    JobResult,
    TieringJob,
    _let_trigger_end,
    _lost_reason,
    included_tables,
    log_size_classes,
)
from tiering.kvstore.contract import BucketLog, StoreColumn, StoreTable, TableLog
from tiering.lake.maintenance import LakeMaintainer
from tiering.lake.round_writer import TableCommit
from tiering.round.outcome import RoundOutcome

pytestmark = pytest.mark.unit


def config(**tables):
    return load_config(
        None,
        {},
        {
            "job.name": "j",
            "job.checkpoint": "/tmp/c",
            "kvstore.url": "http://127.0.0.1:1",
            "zookeeper.hosts": "127.0.0.1:1",
            "lake.root": "/tmp/l",
            **{f"tables.{k}": v for k, v in tables.items()},
        },
    )


def table(name: str) -> StoreTable:
    return StoreTable(name, 1, (StoreColumn("id", "bigint", pa.int64(), nullable=False),), ("id",), 1)


class Catalog:
    """A store's catalog (the seam's ``tables`` and ``log_ends``), in the store's order."""

    def __init__(self, *names: str, ends: dict[str, list[int]] | None = None) -> None:
        self.names = names
        self.ends = ends or {}

    def tables(self) -> list[StoreTable]:
        return [table(n) for n in self.names]

    def log_ends(self, tables) -> dict[str, TableLog]:
        return {
            t: TableLog(1, {b: BucketLog(b, 0, end) for b, end in enumerate(self.ends[t])})
            for t in tables
            if t in self.ends
        }


def test_included_tables_are_the_stores_tables_the_config_selects_sorted():
    store = Catalog("users", "orders_tmp", "orders", "orders_eu", "audit")

    assert included_tables(config(), store) == ["audit", "orders", "orders_eu", "orders_tmp", "users"]
    assert included_tables(config(include=["orders*"], exclude=["*_tmp"]), store) == ["orders", "orders_eu"]
    assert included_tables(config(include=["nothing*"]), store) == []


def test_a_tables_weight_is_its_logs_size_class():
    store = Catalog(ends={"quiet": [0, 0], "small": [2, 1], "big": [1 << 19, 1 << 19]})

    assert log_size_classes(store, ["quiet", "small", "big"]) == {"quiet": 1, "small": 2, "big": 21}


def test_a_run_is_ok_only_without_failed_tables():
    assert JobResult().ok and JobResult(rounds=3).ok
    assert not JobResult(rounds=3, failed_tables={"orders": "boom"}).ok


class Term:
    """What ``_lost_reason`` asks of a leader term."""

    def __init__(
        self, lost_reason: str | None = None, check_raises: Exception | None = None, refusal: str | None = None
    ) -> None:
        self.lost = threading.Event()
        if lost_reason is not None:
            self.lost.set()
        self.lost_reason = lost_reason
        self.refusal = refusal
        self._check_raises = check_raises
        self.checked = 0

    def check(self) -> None:
        self.checked += 1
        if self._check_raises is not None:
            raise self._check_raises


def test_a_fence_error_is_the_reason_without_asking_zookeeper():
    term = Term(check_raises=AssertionError("must not be asked"))

    assert _lost_reason(term, NotLeaderError("epoch 3 fenced by epoch 4")) == "epoch 3 fenced by epoch 4"
    assert term.checked == 0


def test_a_term_the_watchdog_ended_gives_its_own_reason():
    term = Term(lost_reason="session expired", check_raises=AssertionError("must not be asked"))

    assert _lost_reason(term, TieringError("query failed: py4j")) == "session expired"
    assert term.checked == 0


def test_otherwise_zookeeper_is_asked():
    assert (
        _lost_reason(Term(check_raises=LeadershipLostError("epoch moved on to 5")), RuntimeError("x"))
        == "epoch moved on to 5"
    )
    still_leading = Term()
    assert _lost_reason(still_leading, TieringError("query failed: disk full")) is None
    assert still_leading.checked == 1


def test_a_term_its_fence_refused_is_over_though_zookeeper_would_now_confirm_it():
    # ZooKeeper was unreachable when the round's fence asked (the round aborted); it is back now
    term = Term(
        refusal="cannot confirm leadership of job 'j' (epoch 1): ConnectionLoss()",
        check_raises=AssertionError("must not be asked"),
    )

    assert _lost_reason(term, TieringError("query failed: py4j")) == term.refusal
    assert term.checked == 0


class Query:
    """A streaming query's ``isActive`` and ``status``: its trigger runs ``polls`` more looks."""

    def __init__(self, polls: float) -> None:
        self.isActive = True
        self.polls = polls

    @property
    def status(self):
        self.polls -= 1
        return {"isTriggerActive": self.polls >= 0}


def test_a_clean_stop_waits_for_the_running_trigger_at_most_stop_wait_s():
    started = time.monotonic()
    _let_trigger_end(Query(polls=float("inf")), 0.3, poll_s=0.01)
    assert 0.3 <= time.monotonic() - started < 2.0, "a trigger that never ends is waited for stop_wait_s"

    ending = Query(polls=5)
    started = time.monotonic()
    _let_trigger_end(ending, 30.0, poll_s=0.01)
    assert time.monotonic() - started < 2.0 and ending.polls < 0, "returns as soon as the trigger ends"

    started = time.monotonic()
    _let_trigger_end(Query(polls=float("inf")), 0.0, poll_s=0.01)
    assert time.monotonic() - started < 0.5, "0: stop at once"


def _commit(table: str, *, skipped: bool = False) -> TableCommit:
    return TableCommit(table=table, table_id=1, delta_version=-1 if skipped else 4, positions={}, skipped=skipped)


def test_a_pass_covers_every_table_first_then_the_ones_rounds_committed_to_since_the_last(tmp_path, monkeypatch):
    settings = {
        "job.name": "j",
        "job.checkpoint": str(tmp_path / "ckpt"),
        "kvstore.url": "http://127.0.0.1:1",
        "zookeeper.hosts": "127.0.0.1:1",
        "lake.root": str(tmp_path / "lake"),
        "maintenance.every_rounds": 2,
    }
    context = TermContext(config=load_config(None, {}, settings), epoch=1, lease_id="l")
    job = TieringJob(None, context, lease=SimpleNamespace(), store=Catalog("a", "b", "c"))
    passes, run = [], LakeMaintainer.run
    monkeypatch.setattr(LakeMaintainer, "run", lambda self, tables: passes.append(run(self, tables)) or passes[-1])
    rounds = [{"a": _commit("a")}, {}, {"b": _commit("b"), "c": _commit("c", skipped=True)}, {}]

    for round_id, committed in enumerate(rounds, start=1):
        job._round_done(RoundOutcome(round_id, 1, committed=committed))

    # the lake is empty: a table a pass looks at is "no table tiered by job", one it skips "unchanged"
    looked = [[t for t, done in p.done.items() if done.skipped.startswith("no table tiered")] for p in passes]
    assert looked == [["a", "b", "c"], ["b"]], "a replayed or empty round (skipped commit) changed nothing"
    assert all(passes[1].done[t].skipped.startswith("unchanged") for t in ("a", "c"))
