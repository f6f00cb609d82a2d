"""One term's query (tiering.job.query), its pure decisions: when a run is ok, how long a clean stop
waits, and which tables the rounds hand to the term's maintainer."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from tests.unit.job.catalog import Catalog
from tiering.conf.loader import load_config
from tiering.context import TermContext
from tiering.job.query import JobResult, TieringJob, _let_trigger_end
from tiering.round.outcome import RoundOutcome
from tiering.writers.maintenance import LakeMaintainer
from tiering.writers.round_writer import TableCommit

pytestmark = pytest.mark.unit


def test_a_run_is_ok_only_without_failed_tables():
    assert JobResult().ok and JobResult(rounds=3).ok
    assert not JobResult(rounds=3, failed_tables={"orders": "boom"}).ok


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
