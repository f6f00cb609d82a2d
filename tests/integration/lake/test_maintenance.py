"""Lake maintenance on real Delta tables (delta-rs), written the way round commits are: every
round appends one small file per bucket with the round's offsets and txn, so buckets collect
many files, as a writer that appends would leave them."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, Schema, write_deltalake
from deltalake.transaction import AddAction, CommitProperties, Transaction

from tests.support.lake import codecs
from tiering.conf.model import MaintenanceConfig
from tiering.enumerator.positions import LakePosition
from tiering.errors import FencedEpochError, LakeCommitError
from tiering.lake.maintenance import LakeMaintainer
from tiering.lakestate.commits import commit_metadata
from tiering.lakestate.lake import Lake
from tiering.lakestate.layout import app_id, txn_version

pytestmark = pytest.mark.integration

JOB, TABLE, BUCKETS = "m-job", "orders", 2
CONFIG = MaintenanceConfig(min_files=3, target_file_mb=1, checkpoint_interval=5, file_retention_hours=24)


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "__bucket": pa.array([i % BUCKETS for i in ids], pa.int32()),
        "__offset": pa.array(ids, pa.int64()),
    })


def _round(path: str, epoch: int, round_id: int, rows: pa.Table, sort_key: str | None = None) -> None:
    """One appending round commit: the round's offsets in its metadata, its txn version."""
    position = LakePosition(1, {b: round_id * 10 for b in range(BUCKETS)})
    meta = commit_metadata(job=JOB, position=position, epoch=epoch, round_id=round_id, lease_id="l", snapshots={},
                           sort_key=sort_key)
    write_deltalake(path, rows, mode="append", partition_by=["__bucket"], commit_properties=CommitProperties(
        custom_metadata=meta, app_transactions=[Transaction(app_id(JOB, TABLE), txn_version(epoch, round_id))]))


def _tiered(tmp_path: Path, rounds: int = 8, epoch: int = 3) -> tuple[Lake, str]:
    lake = Lake.at(str(tmp_path / "lake"))
    path = lake.path(TABLE)
    for r in range(1, rounds + 1):
        _round(path, epoch, r, _rows(r * 100, 6))
    return lake, path


def _ids(path: str) -> list[int]:
    return sorted(DeltaTable(path).to_pyarrow_table().column("id").to_pylist())


def _files_per_bucket(path: str) -> dict[int, int]:
    actions = pa.table(DeltaTable(path).get_add_actions(flatten=True))
    buckets = [int(b) for b in actions.column("partition.__bucket").to_pylist()]
    return {b: buckets.count(b) for b in sorted(set(buckets))}


def _backdate(path: Path, hours: float) -> None:
    then = time.time() - hours * 3600
    os.utime(path, (then, then))


def test_compaction_merges_each_bucket_and_keeps_rows_position_and_txn(tmp_path):
    lake, path = _tiered(tmp_path)
    before_ids, before = _ids(path), lake.load(TABLE)
    assert _files_per_bucket(path) == {0: 8, 1: 8}

    done = LakeMaintainer(lake, JOB, CONFIG, epoch=3).maintain(TABLE)

    assert _files_per_bucket(path) == {0: 1, 1: 1}
    assert (done.files_before, done.files_after, done.compacted) == (16, 2, (0, 1))
    assert _ids(path) == before_ids
    after = lake.load(TABLE)
    assert after.position() == before.position() and after.info.delta_version == before.info.delta_version
    assert after.transaction_version(app_id(JOB, TABLE)) == txn_version(3, 8)
    assert DeltaTable(path).metadata().configuration["kvTiering.fenceEpoch"] == "3"
    again = LakeMaintainer(lake, JOB, CONFIG, epoch=3).maintain(TABLE)
    assert again.compacted == () and again.version_after == again.version_before, "nothing left to do"



@pytest.mark.parametrize("compression", ["snappy", "lz4"])
def test_compaction_writes_the_lakes_codec(tmp_path, compression):
    lake, path = _tiered(tmp_path)  # appended by delta-rs, snappy; compacted, delta-rs would write zstd
    lake = Lake.at(lake.root, compression=compression)
    expected = _ids(path)

    LakeMaintainer(lake, JOB, CONFIG, epoch=3).maintain(TABLE)

    files = DeltaTable(path).file_uris()
    assert len(files) == BUCKETS and _ids(path) == expected
    assert set().union(*(codecs(pq.read_metadata(f)) for f in files)) == {{"snappy": "SNAPPY", "lz4": "LZ4"}[compression]}

def test_a_table_whose_rounds_name_their_sort_key_is_compacted_sorted_by_it_with_its_range_in_the_stats(tmp_path):
    lake = Lake.at(str(tmp_path / "lake"))
    path = lake.path(TABLE)
    for r in range(1, 9):  # each round's ids lower than the last one's, each file descending
        _round(path, 3, r, _rows((9 - r) * 100, 6).take(list(range(5, -1, -1))), sort_key="id")
    expected = _ids(path)

    done = LakeMaintainer(lake, JOB, CONFIG, epoch=3).maintain(TABLE)

    assert (done.compacted, _files_per_bucket(path)) == ((0, 1), {0: 1, 1: 1})
    assert _ids(path) == expected
    actions = pa.table(DeltaTable(path).get_add_actions(flatten=True)).to_pylist()
    for action in actions:
        ids = pq.read_table(f"{path}/{action['path']}").column("id").to_pylist()
        assert ids == sorted(ids), "the compacted file is sorted by the key"
        assert (action["min.id"], action["max.id"]) == (ids[0], ids[-1])


def test_checkpoint_is_made_at_the_newest_round_commit_and_old_log_entries_go(tmp_path):
    lake, path = _tiered(tmp_path, rounds=12)
    log_dir = Path(path) / "_delta_log"
    for entry in log_dir.iterdir():
        _backdate(entry, 24 * 40)
    newest_round = lake.load(TABLE).info.delta_version

    done = LakeMaintainer(lake, JOB, CONFIG.model_copy(update={"log_retention_hours": 24}), epoch=3).maintain(TABLE)

    assert done.checkpoint == newest_round
    assert (log_dir / f"{newest_round:020d}.checkpoint.parquet").exists()
    remaining = sorted(int(p.name[:20]) for p in log_dir.glob("*.json"))
    assert remaining[0] == newest_round, f"entries older than the checkpoint and the retention stay: {remaining}"
    loaded = lake.load(TABLE)
    assert loaded.position().buckets == {0: 120, 1: 120}, "the newest round commit survives the cleanup"
    assert _ids(path) == sorted(i for r in range(1, 13) for i in range(r * 100, r * 100 + 6))
    assert DeltaTable(path).metadata().configuration["delta.checkpointInterval"] == "5"
    assert DeltaTable(path).metadata().configuration["delta.deletedFileRetentionDuration"] == "interval 24 hours"


def test_unreferenced_file_older_than_the_retention_is_removed_fresh_and_referenced_stay(tmp_path):
    lake, path = _tiered(tmp_path, rounds=2)
    bucket = Path(path) / "__bucket=0"
    old, fresh = bucket / f"part-{uuid.uuid4().hex}.parquet", bucket / f"part-{uuid.uuid4().hex}.parquet"
    for orphan in (old, fresh):
        pq.write_table(_rows(9000, 2).drop(["__bucket"]), orphan)
    _backdate(old, 25)
    referenced = sorted(DeltaTable(path).file_uris())
    for uri in referenced:
        _backdate(Path(uri.removeprefix("file://")), 48)

    done = LakeMaintainer(lake, JOB, CONFIG, epoch=3).maintain(TABLE)

    assert done.vacuumed == 1
    assert not old.exists() and fresh.exists()
    assert all(Path(uri.removeprefix("file://")).exists() for uri in referenced)
    assert 9000 not in _ids(path)


def test_stale_epoch_is_refused_and_changes_nothing(tmp_path):
    lake, path = _tiered(tmp_path, rounds=4, epoch=3)
    _round(path, 5, 1, _rows(5000, 4))  # a newer term's round
    version, files = DeltaTable(path).version(), sorted(DeltaTable(path).file_uris())

    with pytest.raises(FencedEpochError, match="epoch 5 already wrote to the lake.*maintenance at epoch 4 refused"):
        LakeMaintainer(lake, JOB, CONFIG, epoch=4).maintain(TABLE)

    assert DeltaTable(path).version() == version and sorted(DeltaTable(path).file_uris()) == files


def test_a_newer_terms_fence_refuses_an_older_maintainer(tmp_path):
    lake, path = _tiered(tmp_path, rounds=4, epoch=3)
    LakeMaintainer(lake, JOB, CONFIG, epoch=6).maintain(TABLE)  # `tiering maintain` at epoch 6 compacted

    with pytest.raises(FencedEpochError, match="epoch 6 already wrote"):
        LakeMaintainer(lake, JOB, CONFIG, epoch=3).maintain(TABLE)


def _overwrite_bucket(dt: DeltaTable, path: str, bucket: int, ids: list[int], epoch: int, round_id: int) -> None:
    """A round commit the way the delta-rs round writer makes it: the bucket replaced by one file."""
    rel = f"__bucket={bucket}/part-{uuid.uuid4().hex}.parquet"
    data = pa.table({"id": pa.array(ids, pa.int64()), "__offset": pa.array(ids, pa.int64())})
    pq.write_table(data, f"{path}/{rel}")
    add = AddAction(path=rel, size=os.path.getsize(f"{path}/{rel}"), partition_values={"__bucket": str(bucket)},
                    modification_time=int(time.time() * 1000), data_change=True, stats=f'{{"numRecords": {len(ids)}}}')
    schema = Schema.from_arrow(pa.schema([("id", pa.int64()), ("__bucket", pa.int32()), ("__offset", pa.int64())]))
    position = LakePosition(1, {b: round_id * 10 for b in range(BUCKETS)})
    meta = commit_metadata(job=JOB, position=position, epoch=epoch, round_id=round_id, lease_id="l", snapshots={})
    dt.create_write_transaction([add], "overwrite", schema, partition_by=["__bucket"],
                                partition_filters=[("__bucket", "in", [str(bucket)])],
                                commit_properties=CommitProperties(custom_metadata=meta, app_transactions=[
                                    Transaction(app_id(JOB, TABLE), txn_version(epoch, round_id))]))


def test_compaction_losing_a_race_with_a_round_on_its_bucket_fails_and_the_round_wins(tmp_path, monkeypatch):
    lake, path = _tiered(tmp_path, rounds=6)
    DeltaTable(path).alter.set_table_properties({  # as a pass of this term left them: no property commit now
        "delta.checkpointInterval": "5", "delta.logRetentionDuration": "interval 720 hours",
        "delta.deletedFileRetentionDuration": "interval 24 hours", "kvTiering.fenceEpoch": "3",
    }, raise_if_not_exists=False)
    stale = DeltaTable(path)
    _overwrite_bucket(DeltaTable(path), path, 0, [0, 2, 4], epoch=3, round_id=7)  # lands first
    expected = _ids(path)
    monkeypatch.setattr("tiering.lake.maintenance.open_table", lambda *a, **k: stale)

    with pytest.raises(LakeCommitError, match=r"compaction of buckets \[0, 1\] lost to a concurrent commit"):
        LakeMaintainer(lake, JOB, CONFIG, epoch=3).maintain(TABLE)

    assert _ids(path) == expected
    assert lake.load(TABLE).position().buckets == {0: 70, 1: 70}


def test_a_round_prepared_before_a_compaction_cannot_land_after_it(tmp_path):
    lake, path = _tiered(tmp_path, rounds=6)
    stale_round = DeltaTable(path)  # a stale writer read the table, then paused
    expected = _ids(path)
    LakeMaintainer(lake, JOB, CONFIG, epoch=4).maintain(TABLE)

    with pytest.raises(Exception, match="Metadata changed"):
        _overwrite_bucket(stale_round, path, 0, [0, 2, 4], epoch=3, round_id=7)

    assert _ids(path) == expected, "no row twice: the compacted file and the round's would both be live"
