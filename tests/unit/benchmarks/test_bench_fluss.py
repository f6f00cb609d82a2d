"""The Fluss benchmark's hand-written changelog copy keeps the last change of each key, as a round does."""

from __future__ import annotations

import pyarrow as pa
import pytest

from benchmarks.bench_fluss import _last_per_key

pytestmark = pytest.mark.unit


def test_the_last_change_of_each_key_is_kept_a_delete_included():
    changes = pa.table(
        {
            "id": [1, 2, 1, 3, 2],
            "note": ["a", "b", "c", "d", None],
            "__op": ["+I", "+I", "+U", "+I", "-D"],
        }
    )

    last = _last_per_key(changes)

    assert sorted(last.to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "note": "c", "__op": "+U"},
        {"id": 2, "note": None, "__op": "-D"},
        {"id": 3, "note": "d", "__op": "+I"},
    ]
