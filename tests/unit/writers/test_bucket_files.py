"""How a rewritten bucket's files are encoded and sized: dictionaries only where values repeat,
the configured codec, files near the target from the first rewrite of a snapshot the store wrote
with pyarrow's defaults (a local lake; the integration tests cover what the files hold, locally
and on S3)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.lake import codecs
from tests.support.store_files import EPOCH0, write_log
from tests.support.tables import kv_table
from tiering.delta_log.lake import LakeFile
from tiering.kvstore.contract import changes as changelog
from tiering.kvstore.contract.changes import splice_changes
from tiering.objectstore.object_store import ObjectStore
from tiering.writers.bucket_plan import BucketBase, BucketPlan
from tiering.writers.buckets import BucketTask, WrittenFile, run_task

pytestmark = pytest.mark.unit

TABLE = kv_table({"id": "bigint", "name": "string", "colour": "string", "qty": "int"})
ROWS = 120_000
TARGET = 128 * 1024
#: ``lake.compression`` values and the codec pyarrow's metadata names for each (lz4 is LZ4_RAW).
CODECS = {"zstd": "ZSTD", "snappy": "SNAPPY", "lz4": "LZ4", "gzip": "GZIP", "none": "UNCOMPRESSED"}


def snapshot(path) -> str:
    """A bucket's snapshot as the store writes it (pyarrow's defaults): even ids, each row once."""
    ids = pa.array(range(0, 2 * ROWS, 2), pa.int64())
    pq.write_table(
        pa.table(
            {
                "id": ids,
                "name": [f"name-{i}" for i in range(0, 2 * ROWS, 2)],
                "colour": [("red", "green", "blue")[i % 3] for i in range(ROWS)],
                "qty": pa.array([i % 1000 for i in range(ROWS)], pa.int32()),
                "__offset": pa.array(range(ROWS), pa.int64()),
                "__timestamp": pa.array([EPOCH0] * ROWS, pa.timestamp("us", tz="UTC")),
            }
        ),
        path,
    )
    return str(path)


def rewrite(store: ObjectStore, plan: BucketPlan, compression: str = "zstd") -> list[WrittenFile]:
    result = run_task(BucketTask(TABLE, store.uri("t"), plan, store, target_file_bytes=TARGET, compression=compression))
    assert result.error is None
    return list(result.files)


def metadata(store: ObjectStore, written: WrittenFile) -> pq.FileMetaData:
    with store.filesystem.open_input_file(store.path(f"{store.uri('t')}/{written.path}")) as handle:
        return pq.read_metadata(handle)


def rows(store: ObjectStore, written: list[WrittenFile]) -> pa.Table:
    """The rows of ``written``, in key order."""
    files = [pq.read_table(store.filesystem.open_input_file(store.path(f"{store.uri('t')}/{f.path}"))) for f in written]
    return pa.concat_tables(files).sort_by("id")


def rewrite_snapshot(tmp_path, compression: str = "zstd") -> tuple[ObjectStore, list[WrittenFile]]:
    """The snapshot with one change on top, rewritten whole: the bucket's first rewrite."""
    store = ObjectStore.of(str(tmp_path / "lake"))
    log = write_log(tmp_path / "log", TABLE, [(ROWS, "+U", {"id": 0, "name": "changed", "colour": "red", "qty": 1})])
    plan = BucketPlan(
        0, BucketBase.SNAPSHOT, (snapshot(tmp_path / "snapshot.parquet"),), (log,), ROWS, ROWS + 1, snapshot_id=1
    )
    return store, rewrite(store, plan, compression)


@pytest.fixture
def first_rewrite(tmp_path) -> tuple[ObjectStore, list[WrittenFile]]:
    return rewrite_snapshot(tmp_path)


def test_only_the_columns_whose_values_repeat_are_dictionary_encoded(first_rewrite):
    store, written = first_rewrite
    meta = metadata(store, written[0])
    columns = [meta.row_group(0).column(i) for i in range(meta.num_columns)]

    assert {c.path_in_schema for c in columns if c.has_dictionary_page} == {"colour", "qty", "__timestamp"}


@pytest.mark.parametrize("compression", ["zstd", "snappy"])
def test_the_first_rewrite_of_a_snapshot_encoded_otherwise_lands_near_the_target(tmp_path, compression):
    store, written = rewrite_snapshot(tmp_path, compression)

    # the snapshot takes 18 bytes a row, these files 2.4 (zstd): sized by it, a file would hold a
    # seventh of the target; sized by a zstd sample, a snappy file would be past it
    assert len(written) > 1 and sum(f.num_records for f in written) == ROWS
    assert all(0.7 * TARGET <= f.size <= 1.15 * TARGET for f in written), [f.size for f in written]


@pytest.mark.parametrize("compression", sorted(CODECS))
def test_every_column_of_every_file_has_the_configured_codec_and_the_rows_are_the_same(tmp_path, compression):
    store, written = rewrite_snapshot(tmp_path / compression, compression)
    reference_store, reference = rewrite_snapshot(tmp_path / "reference", "zstd" if compression != "zstd" else "none")

    assert set().union(*(codecs(metadata(store, f)) for f in written)) == {CODECS[compression]}
    assert rows(store, written).equals(rows(reference_store, reference))


def test_a_file_grown_past_the_target_is_split_into_files_near_it(first_rewrite, tmp_path):
    store, written = first_rewrite
    lake = lake_files(store, written)
    grown = lake[1]
    odd = range(grown.low + 1, grown.high, 2)  # a new key between each two of the file's
    log = write_log(
        tmp_path / "log2",
        TABLE,
        [(ROWS + 1 + n, "+I", {"id": k, "name": f"name-{k}", "colour": "blue", "qty": 7}) for n, k in enumerate(odd)],
    )
    plan = BucketPlan(
        0, BucketBase.LAKE, tuple(f.uri for f in lake), (log,), ROWS + 1, ROWS + 1 + len(odd), lake_files=lake
    )

    split = rewrite(store, plan)

    assert len(split) > 1 and sum(f.num_records for f in split) == grown.rows + len(odd)
    assert all(0.7 * TARGET <= f.size <= 1.15 * TARGET for f in split), [f.size for f in split]


def lake_files(store: ObjectStore, written: list[WrittenFile]) -> tuple[LakeFile, ...]:
    """``written`` as the lake lists them, with their key ranges."""
    return tuple(
        LakeFile(
            f"{store.uri('t')}/{f.path}",
            f.path,
            f.size,
            f.num_records,
            json.loads(f.stats)["minValues"]["id"],
            json.loads(f.stats)["maxValues"]["id"],
        )
        for f in written
    )


def test_a_rewrite_by_file_splices_and_writes_what_the_sort_would(first_rewrite, tmp_path, monkeypatch):
    store, written = first_rewrite
    lake = lake_files(store, written)
    low, high = lake[1].low, lake[1].high
    row = {"name": "changed", "colour": "red", "qty": 5}
    log = write_log(
        tmp_path / "log2",
        TABLE,
        [
            (ROWS + 1, "+U", {"id": low + 2, **row}),
            (ROWS + 2, "+I", {"id": low + 3, **row}),  # a key, a new one
            (ROWS + 3, "-D", {"id": low + 100}),
            (ROWS + 4, "-D", {"id": low + 101}),  # a key, an absent one
            (ROWS + 5, "+U", {"id": high, **row}),
            (ROWS + 6, "-D", {"id": low}),  # the file's ends
            (ROWS + 7, "+U", {"id": low + 2, **row, "qty": 6}),  # the newest of two
        ],
    )
    plan = BucketPlan(0, BucketBase.LAKE, tuple(f.uri for f in lake), (log,), ROWS + 1, ROWS + 8, lake_files=lake)
    spliced: list[bool] = []

    def spy(*args, **kwargs):
        result = splice_changes(*args, **kwargs)
        spliced.append(result is not None)
        return result

    monkeypatch.setattr(changelog, "splice_changes", spy)
    by_splice = rewrite(store, plan)
    monkeypatch.setattr(changelog, "splice_changes", lambda *args, **kwargs: None)
    by_sort = rewrite(store, plan)

    assert spliced == [True]
    assert [(f.num_records, f.stats, f.size) for f in by_splice] == [(f.num_records, f.stats, f.size) for f in by_sort]
    for mine, theirs in zip(by_splice, by_sort, strict=False):  # the same rows, in the same order, file by file
        assert pq.read_table(store.filesystem.open_input_file(store.path(f"{store.uri('t')}/{mine.path}"))).equals(
            pq.read_table(store.filesystem.open_input_file(store.path(f"{store.uri('t')}/{theirs.path}")))
        )
    assert sum(f.num_records for f in by_splice) == lake[1].rows + 1 - 2


def test_a_rewrite_changing_every_key_of_a_file_sorts_instead_of_splicing(first_rewrite, tmp_path, monkeypatch):
    """Changes to every key make no cut the splice could decline on; placing them one by one in
    Python is the sort's work done slowly, so the rewrite sorts them (and writes the same rows)."""
    store, written = first_rewrite
    lake = lake_files(store, written)
    keys = range(lake[1].low, lake[1].high + 1, 2)  # the file's keys: even ids
    log = write_log(
        tmp_path / "log2",
        TABLE,
        [
            (ROWS + 1 + i, "+U", {"id": k, "name": f"changed-{k}", "colour": "red", "qty": 5})
            for i, k in enumerate(keys)
        ],
    )
    plan = BucketPlan(
        0, BucketBase.LAKE, tuple(f.uri for f in lake), (log,), ROWS + 1, ROWS + 1 + len(keys), lake_files=lake
    )
    tried: list[bool] = []

    def spy(*args, **kwargs):
        tried.append(True)
        return splice_changes(*args, **kwargs)

    monkeypatch.setattr(changelog, "splice_changes", spy)
    rewritten = rows(store, rewrite(store, plan))

    assert tried == []
    assert rewritten.column("id").to_pylist() == list(keys)
    assert rewritten.column("name").to_pylist() == [f"changed-{k}" for k in keys]
