"""``lake.change_data_feed``: Delta's change feed of a tiered table holds, per round (Delta
version), exactly the net change of each key the round changed — read back with delta-rs's own
feed reader and compared with what the store's snapshot and log files say changed.

The expected feed is computed from the store-shaped inputs alone (an oracle of the table's rows
before and after each round), never from the lake.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow.fs as pafs
import pytest

from tests.support.lake import file_codecs, read_feed, replayed
from tests.support.store_files import ts, write_log, write_snapshot
from tests.support.writers import JOB, ORDERS, commit, log_entry, orders_rows, row
from tiering.delta_log.lake import Lake
from tiering.delta_log.layout import txn_version
from tiering.enumerator.splits import LogSplit, SnapshotSplit, Split
from tiering.errors import LakeCommitError
from tiering.writers.delta_rs_writer import DeltaRsRoundWriter

pytestmark = pytest.mark.integration

#: id -> (bucket, name, price, offset, timestamp), like ``orders_rows``
Rows = dict[int, tuple]
#: (change type, id, bucket, name, price, offset, timestamp)
Change = tuple


@dataclass(frozen=True)
class BucketInput:
    """One bucket's part of a round as the store has it: a snapshot (rows with the offset that
    wrote them) taken at ``log_from``, and/or log changes ``[log_from, log_to)``."""

    bucket: int
    log_from: int
    log_to: int
    changes: list[tuple[int, str, dict]] = field(default_factory=list)
    snapshot: list[tuple[dict, int]] | None = None

    def splits(self, directory) -> dict[Split, list[str]]:
        out: dict[Split, list[str]] = {}
        if self.snapshot is not None:
            split = SnapshotSplit("orders", self.bucket, 1, snapshot_id=self.log_from, log_offset=self.log_from)
            out[split] = [write_snapshot(directory, ORDERS, self.snapshot)]
        if self.log_to > self.log_from:
            out[LogSplit("orders", self.bucket, 1, self.log_from, self.log_to)] = [
                write_log(directory, ORDERS, self.changes)
            ]
        return out

    def applied(self, rows: Rows) -> Rows:
        """``rows`` (the table) after this bucket's part of the round."""
        new = dict(rows)
        if self.snapshot is not None:
            new = {k: v for k, v in new.items() if v[0] != self.bucket}
            new.update({r["id"]: self._row(r, o) for r, o in self.snapshot})
        for offset, op, r in sorted(self.changes, key=lambda c: c[0]):
            if op == "-D":
                new.pop(r["id"], None)
            else:
                new[r["id"]] = self._row(r, offset)
        return new

    def _row(self, r: dict, offset: int) -> tuple:
        return (self.bucket, r["name"], r["price"], offset, ts(offset))


def files(directory, inputs: Iterable[BucketInput]) -> dict[Split, list[str]]:
    return {split: paths for i in inputs for split, paths in i.splits(directory).items()}


def expected(before: Rows, inputs: Iterable[BucketInput]) -> tuple[Rows, list[Change]]:
    """The table after the round, and the round's net change per key."""
    after = before
    for i in inputs:
        after = i.applied(after)
    changes: list[Change] = []
    for key in before.keys() | after.keys():
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        if old is None:
            changes.append(("insert", key, *new))
        elif new is None:
            changes.append(("delete", key, *old))
        else:
            changes += [("update_preimage", key, *old), ("update_postimage", key, *new)]
    return after, sorted(changes)


def feed(lake: Lake, version: int) -> list[Change]:
    """The change feed of one Delta version, read by delta-rs."""
    data = read_feed(lake, "orders", version, version)
    assert {r["_commit_version"] for r in data} <= {version}
    return sorted(
        (r["_change_type"], r["id"], r["__bucket"], r["name"], r["price"], r["__offset"], r["__timestamp"])
        for r in data
    )


def change_data_files(lake: Lake) -> list[str]:
    store = lake.store
    found = store.filesystem.get_file_info(pafs.FileSelector(store.path(lake.path("orders")), recursive=True))
    return [f.path for f in found if "_change_data" in f.path and f.path.endswith(".parquet")]


def feed_writer(spark, lake: Lake, **options) -> DeltaRsRoundWriter:
    return DeltaRsRoundWriter(spark, lake, JOB, change_data_feed=True, **options)


#: Bucket 0: snapshot + log (an update, a delete, a key inserted and updated, a delete of an
#: absent key); bucket 1: snapshot only; bucket 2: log only.
ROUND1 = [
    BucketInput(
        0,
        10,
        15,
        snapshot=[(row(1, "a"), 2), (row(2, "b"), 5), (row(3, "c"), 9)],
        changes=[
            (10, "+U", row(2, "b2", "2.50")),
            (11, "-D", {"id": 3}),
            (12, "+I", row(4, "d")),
            (13, "+U", row(4, "d2")),
            (14, "-D", {"id": 5}),
        ],
    ),
    BucketInput(1, 3, 3, snapshot=[(row(10, "x"), 0), (row(11, "y"), 1), (row(13, "w"), 2)]),
    BucketInput(2, 0, 3, changes=[(0, "+I", row(20, "p")), (1, "+I", row(21, "q")), (2, "-D", {"id": 20})]),
]

#: Bucket 0: an update, a delete, an insert updated in the same round, a key updated twice, a
#: delete of an absent key; bucket 1 bootstrapped again (10 unchanged, 11 updated, 13 gone, 12
#: new and updated on top); bucket 3: its first bootstrap; bucket 2 untouched.
ROUND2 = [
    BucketInput(
        0,
        15,
        22,
        changes=[
            (15, "+U", row(1, "a2")),
            (16, "-D", {"id": 2}),
            (17, "+I", row(6, "f")),
            (18, "+U", row(6, "f2", "6.00")),
            (19, "+U", row(4, "d3")),
            (20, "+U", row(4, "d4", "4.40")),
            (21, "-D", {"id": 7}),
        ],
    ),
    BucketInput(
        1, 6, 7, snapshot=[(row(10, "x"), 0), (row(11, "y2"), 4), (row(12, "z"), 5)], changes=[(6, "+U", row(12, "z2"))]
    ),
    BucketInput(3, 1, 1, snapshot=[(row(30, "s"), 0)]),
]


def test_each_version_of_the_feed_is_the_rounds_net_change_per_key(spark, lake, tmp_path):
    writer = feed_writer(spark, lake)
    rows1, changes1 = expected({}, ROUND1)
    first = commit(writer, files(tmp_path / "r1", ROUND1))

    assert (first.delta_version, first.written_by) == (0, "executors")  # only inserts: add actions say it all
    assert orders_rows(lake) == rows1 and feed(lake, 0) == changes1
    assert {c[0] for c in changes1} == {"insert"} and "cdc" not in log_entry(lake, 0)

    rows2, changes2 = expected(rows1, ROUND2)
    second = commit(writer, files(tmp_path / "r2", ROUND2), round_id=2)

    assert (second.delta_version, second.written_by) == (1, "driver (MERGE)")
    assert orders_rows(lake) == rows2 and feed(lake, 1) == changes2
    assert {c[0] for c in changes2} == {"insert", "update_preimage", "update_postimage", "delete"}
    untouched = {10, 21}  # a row the snapshot repeats as it is, a bucket the round did not touch
    assert untouched <= rows2.keys() and not untouched & {c[1] for c in changes2}
    entry = log_entry(lake, 1)
    assert entry["cdc"] and entry["txn"] == [{"appId": f"tiering/{JOB}/orders", "version": txn_version(1, 2)}]
    assert file_codecs(lake, "orders", [a["path"] for a in entry["add"] + entry["cdc"]]) == {
        "ZSTD"
    }  # lake.compression, not snappy

    replay = commit(writer, files(tmp_path / "r2b", ROUND2), round_id=2)

    assert replay.skipped and lake.load("orders").version == 1
    assert replayed(read_feed(lake, "orders", 0)) == {r["id"]: r for r in lake.load("orders").to_arrow().to_pylist()}


def test_with_the_feed_off_rounds_rewrite_buckets_and_a_table_gets_the_feed_when_it_is_turned_on(spark, lake, tmp_path):
    off = DeltaRsRoundWriter(spark, lake, JOB)
    rows1, _ = expected({}, ROUND1)
    commit(off, files(tmp_path / "r1", ROUND1))
    change = [BucketInput(0, 15, 17, changes=[(15, "+U", row(1, "a2")), (16, "-D", {"id": 2})])]
    rows2, _ = expected(rows1, change)

    assert commit(off, files(tmp_path / "r2", change), round_id=2).written_by == "driver"
    assert "delta.enableChangeDataFeed" not in lake.load("orders").dt.metadata().configuration
    assert "cdc" not in log_entry(lake, 1) and change_data_files(lake) == [] and orders_rows(lake) == rows2

    later = [BucketInput(0, 17, 19, changes=[(17, "+I", row(8, "h")), (18, "+U", row(4, "d9"))])]
    rows3, changes3 = expected(rows2, later)
    result = commit(feed_writer(spark, lake), files(tmp_path / "r3", later), round_id=3)

    assert result.delta_version == 3, "version 2 turned the feed on, version 3 is the round"
    assert lake.load("orders").dt.metadata().configuration["delta.enableChangeDataFeed"] == "true"
    assert orders_rows(lake) == rows3 and feed(lake, 3) == changes3


def test_a_merge_source_beyond_merge_max_rows_fails_the_table_before_writing(spark, lake, tmp_path):
    writer = feed_writer(spark, lake, merge_max_rows=5)
    commit(writer, files(tmp_path / "r1", ROUND1))
    before = change_data_files(lake), orders_rows(lake)

    with pytest.raises(LakeCommitError, match=r"7 rows, more than lake\.merge_max_rows = 5") as err:
        commit(writer, files(tmp_path / "r2", ROUND2[:1]), round_id=2)  # bucket 0's 7 changes

    assert "lake.change_data_feed" in str(err.value) and err.value.table == "orders"
    assert lake.load("orders").version == 0 and (change_data_files(lake), orders_rows(lake)) == before
