"""The store's bulk key path (``rows_by_bucket``, with its integer fast path) places every row
where the protocol's ``bucket_of`` does."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiering.kvstore.bucketing import bucket_of, rows_by_bucket

pytestmark = pytest.mark.unit

INT64 = st.integers(-(2**63), 2**63 - 1)
#: (Arrow type, values) of one key column: integers (the fast path), strings, and integers with a
#: null among them (the general path).
COLUMNS = st.one_of(
    st.tuples(st.just(pa.int64()), st.lists(INT64, min_size=1, max_size=30)),
    st.tuples(st.just(pa.int8()), st.lists(st.integers(-128, 127), min_size=1, max_size=30)),
    st.tuples(st.just(pa.string()), st.lists(st.text(max_size=4), min_size=1, max_size=30)),
    st.tuples(st.just(pa.int64()), st.lists(st.none() | INT64, min_size=1, max_size=30)),
)


@settings(max_examples=200, database=None)
@given(key=st.lists(COLUMNS, min_size=1, max_size=3), num_buckets=st.integers(1, 16))
def test_every_row_lands_in_its_bucket_of(key, num_buckets):
    rows = min(len(values) for _, values in key)
    names = [f"k{i}" for i in range(len(key))]
    data = pa.table({n: pa.array(values[:rows], kind) for n, (kind, values) in zip(names, key, strict=False)})

    keys, groups = rows_by_bucket(data, names, num_buckets)

    assert sorted(i for rows_of in groups.values() for i in rows_of) == list(range(rows))
    for bucket, indices in groups.items():
        for i in indices:
            row = {n: data.column(n)[i].as_py() for n in names}
            assert bucket_of(row, names, num_buckets) == bucket
            assert keys[i] == (row[names[0]] if len(names) == 1 else tuple(row[n] for n in names))
