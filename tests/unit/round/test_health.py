"""The checkpoint's table health file: what a round does to each table's record."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiering.errors import LakeCommitError, TableNotFoundError
from tiering.round.health import RoundFacts, after_round, health_file_path, read_health, write_health
from tiering.round.table_states import FailureCause, TableFailure, TableState

pytestmark = pytest.mark.unit


def failure(message: str, cause: FailureCause = FailureCause.COMMIT) -> TableFailure:
    return TableFailure(cause, TableState.WRITTEN, "LakeCommitError", message)


def test_failures_count_up_in_a_row_and_a_commit_clears_them():
    health = after_round({}, RoundFacts(1_000, committed={"a": (7, 3)}, failed={"b": (8, failure("boom"))}))
    health = after_round(
        health, RoundFacts(2_000, failed={"a": (7, failure("disk full")), "b": (8, failure("boom again"))})
    )
    assert (health["a"].consecutive_failures, health["a"].last_commit_version, health["a"].last_failure) == (
        1,
        3,
        "LakeCommitError: disk full",
    )
    assert (health["b"].consecutive_failures, health["b"].last_failure_ms, health["b"].table_id) == (2, 2_000, 8)
    health = after_round(health, RoundFacts(3_000, committed={"b": (8, 0)}))
    assert (health["b"].consecutive_failures, health["b"].last_commit_ms, health["b"].last_failure) == (
        0,
        3_000,
        "LakeCommitError: boom again",
    )
    assert health["a"].consecutive_failures == 1, "a table the round did not touch keeps its record"


def test_a_dropped_table_keeps_its_first_drop_time_and_a_recreated_one_starts_a_new_record():
    health = after_round({}, RoundFacts(1_000, committed={"t": (1, 5)}))
    health = after_round(
        health, RoundFacts(2_000, failed={"t": (1, failure("gone", FailureCause.DROPPED))}, dropped=frozenset({"t"}))
    )
    health = after_round(
        health, RoundFacts(3_000, failed={"t": (1, failure("gone", FailureCause.DROPPED))}, dropped=frozenset({"t"}))
    )
    assert (health["t"].dropped_ms, health["t"].consecutive_failures) == (2_000, 2)
    health = after_round(health, RoundFacts(4_000, failed={"t": (2, failure("schema"))}))
    assert (
        health["t"].table_id,
        health["t"].consecutive_failures,
        health["t"].dropped,
        health["t"].last_commit_version,
    ) == (2, 1, False, None), "the new incarnation inherits nothing of the old one"


def test_the_file_round_trips_and_a_damaged_one_is_a_fresh_start(tmp_path):
    checkpoint = str(tmp_path / "ckpt")
    assert read_health(checkpoint) == {}
    health = after_round({}, RoundFacts(1_000, committed={"x": (3, 9)}, failed={"y": (4, failure("no"))}))
    write_health(checkpoint, health)
    assert read_health(checkpoint) == health
    assert [p.name for p in Path(health_file_path(checkpoint)).parent.iterdir()] == ["tables.json"], (
        "no temporary file left"
    )
    Path(health_file_path(checkpoint)).write_text("{not json")
    assert read_health(checkpoint) == {}


def test_the_record_keeps_the_failure_typed_and_its_text_as_logged():
    error = TableNotFoundError("table 't' was dropped from the store", table="t")
    health = after_round(
        {}, RoundFacts(1_000, failed={"t": (1, TableFailure.of(error, TableState.ACQUIRED))}, dropped=frozenset({"t"}))
    )
    record = health["t"]
    assert (record.last_failure_cause, record.last_failure_state, record.dropped) == (
        FailureCause.DROPPED,
        TableState.ACQUIRED,
        True,
    )
    assert record.last_failure == "TableNotFoundError: table 't' was dropped from the store"
    health = after_round(
        health, RoundFacts(2_000, failed={"t": (1, TableFailure.of(LakeCommitError("x"), TableState.WRITTEN))})
    )
    assert (health["t"].last_failure_cause, health["t"].dropped) == (FailureCause.COMMIT, False), (
        "found again: not dropped"
    )


def test_a_table_dropped_after_its_commit_keeps_the_commit_and_is_marked_dropped():
    health = after_round({}, RoundFacts(1_000, committed={"t": (1, 0)}, dropped=frozenset({"t"})))
    assert (health["t"].last_commit_version, health["t"].consecutive_failures, health["t"].dropped_ms) == (0, 0, 1_000)


def test_in_a_group_a_table_that_moved_away_leaves_the_file_and_is_no_failure():
    moved = TableFailure(FailureCause.MOVED, TableState.PLANNED, "TableEpochFencedError", "job 'b' owns it")
    health = after_round({}, RoundFacts(1_000, committed={"a": (7, 3), "b": (8, 1)}, owned=frozenset({"a", "b"})))
    health = after_round(
        health, RoundFacts(2_000, committed={"a": (7, 4)}, failed={"b": (8, moved)}, owned=frozenset({"a"}))
    )
    assert sorted(health) == ["a"] and health["a"].last_commit_version == 4
    outside = after_round(
        {"c": health["a"].model_copy(update={"table": "c"})}, RoundFacts(4_000, committed={"a": (7, 5)})
    )
    assert sorted(outside) == ["a", "c"], "outside a group every record stays"


def test_in_a_group_a_table_failed_as_moved_that_the_member_still_owns_is_failing():
    moved = TableFailure(FailureCause.MOVED, TableState.ACQUIRED, "TableMovedError", "fenced at epoch 12")
    owned = frozenset({"t"})
    health = after_round({}, RoundFacts(1_000, committed={"t": (7, 3)}, owned=owned))
    for now in (2_000, 3_000, 4_000):
        health = after_round(health, RoundFacts(now, failed={"t": (7, moved)}, owned=owned))

    assert (health["t"].consecutive_failures, health["t"].last_failure_cause) == (3, FailureCause.MOVED)
    assert health["t"].last_commit_version == 3
    health = after_round(health, RoundFacts(5_000, committed={"t": (7, 4)}, owned=owned))
    assert health["t"].consecutive_failures == 0, "a commit ends the streak"
