"""The group benchmark's reading of the lake: a member's rounds from its commits, and a balanced group."""

from __future__ import annotations

import pytest

from benchmarks.bench_group import _balanced, _Commit, _round_times

pytestmark = pytest.mark.unit


def _round(job: str, number: int, ends_ms: list[int]) -> list[_Commit]:
    return [_Commit(f"t{i}", job, f"{job}-{'a' * 32}", number, at) for i, at in enumerate(ends_ms)]


def test_a_members_round_time_runs_from_one_rounds_last_commit_to_the_next_after_the_first():
    commits = [
        *_round("m0", 7, [900, 1_000]),  # begun before the window: left out
        *_round("m0", 8, [2_000, 3_000]),
        *_round("m0", 9, [4_000, 5_500]),
        *_round("m1", 3, [4_100]),  # another member's
        *_round("m0", 10, [6_000, 7_000, 8_000]),
        *_round("m0", 11, [9_000]),  # past repeat + 1 measured rounds
    ]
    assert _round_times(commits, "m0", repeat=2) == {
        "round_s": [2.5, 2.5],
        "round_p50_s": 2.5,
        "tables_per_round": [2, 3],
    }


def test_a_member_with_too_few_rounds_is_an_error():
    with pytest.raises(RuntimeError, match="m0"):
        _round_times(_round("m0", 1, [1_000]) + _round("m0", 2, [2_000]), "m0", repeat=2)


def test_balanced_means_every_table_owned_by_a_live_member_and_shares_within_one():
    names = ["a", "b", "c", "d", "e"]
    assert _balanced({"a": "x", "b": "x", "c": "x", "d": "y", "e": "y"}, names, ["x", "y"])
    assert not _balanced({"a": "x", "b": "x", "c": "x", "d": "x", "e": "y"}, names, ["x", "y"])
    assert not _balanced({"a": "x", "b": "x", "c": "y", "d": "y"}, names, ["x", "y"])
    assert not _balanced({"a": "x", "b": "x", "c": "x", "d": "y", "e": "z"}, names, ["x", "y"])
