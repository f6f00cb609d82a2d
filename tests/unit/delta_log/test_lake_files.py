"""A table's files per bucket, for the buckets a round asks for only: the same files, bounds and
sizes as when every bucket is read, none of the others."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from tiering.delta_log.lake import Lake
from tiering.delta_log.layout import BUCKET_COLUMN

pytestmark = pytest.mark.unit


def test_only_the_asked_buckets_files_are_returned_as_when_every_bucket_is_read(tmp_path):
    lake = Lake.at(str(tmp_path))
    for bucket in range(4):  # two files per bucket
        for part in range(2):
            ids = pa.array(range(bucket * 100 + part * 10, bucket * 100 + part * 10 + 5), pa.int64())
            rows = pa.table({"id": ids, BUCKET_COLUMN: pa.array([bucket] * len(ids), pa.int32())})
            write_deltalake(lake.path("t"), rows, mode="append", partition_by=[BUCKET_COLUMN])
    table = lake.load("t")

    every = table.files_by_bucket("id")
    some = table.files_by_bucket("id", {1, 3, 7})

    assert sorted(every) == [0, 1, 2, 3]
    assert some == {b: every[b] for b in (1, 3)}, "bucket 7 holds no file: absent, like in the full map"
    assert sorted((f.low, f.high) for f in some[3]) == [(300, 304), (310, 314)]
    assert table.files_by_bucket("id", set()) == {}
