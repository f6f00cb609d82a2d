"""Lake maintenance on real Delta tables (delta-rs), written the way round commits are: every
round appends one small file per bucket with the round's offsets and txn, so buckets collect
many files, as a writer that appends would leave them."""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, Schema, write_deltalake
from deltalake.transaction import AddAction, CommitProperties, Transaction

from tests.support.lake import codecs, delta_rows
from tiering.conf.model import MaintenanceConfig
from tiering.delta_log.commits import commit_metadata
from tiering.delta_log.lake import Lake
from tiering.delta_log.layout import app_id, txn_version
from tiering.enumerator.positions import LakePosition
from tiering.errors import FencedEpochError, LakeCommitError
from tiering.writers.maintenance import REVISIT_S, LakeMaintainer, revisit_after

pytestmark = pytest.mark.integration

JOB, TABLE, BUCKETS = "m-job", "orders", 2
CONFIG = MaintenanceConfig(min_files=3, target_file_mb=1, checkpoint_interval=5, file_retention_hours=24)


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "__bucket": pa.array([i % BUCKETS for i in ids], pa.int32()),
            "__offset": pa.array(ids, pa.int64()),
        }
    )


def _round(
    path: str, epoch: int, round_id: int, rows: pa.Table, sort_key: str | None = None, table: str = TABLE
) -> None:
    """One appending round commit: the round's offsets in its metadata, its txn version."""
    position = LakePosition(1, {b: round_id * 10 for b in range(BUCKETS)})
    meta = commit_metadata(
        job=JOB, position=position, epoch=epoch, round_id=round_id, lease_id="l", snapshots={}, sort_key=sort_key
    )
    write_deltalake(
        path,
        rows,
        mode="append",
        partition_by=["__bucket"],
        commit_properties=CommitProperties(
            custom_metadata=meta, app_transactions=[Transaction(app_id(JOB, table), txn_version(epoch, round_id))]
        ),
    )


def _tiered(tmp_path: Path, rounds: int = 8, epoch: int = 3, table: str = TABLE, first: int = 1) -> tuple[Lake, str]:
    """``table`` with rounds ``first`` to ``first + rounds - 1``: one small file per bucket each."""
    lake = Lake.at(str(tmp_path / "lake"))
    path = lake.path(table)
    for r in range(first, first + rounds):
        _round(path, epoch, r, _rows(r * 100, 6), table=table)
    return lake, path


def _ids(path: str) -> list[int]:
    return sorted(delta_rows(path).column("id").to_pylist())


def _files_per_bucket(path: str) -> dict[int, int]:
    actions = pa.table(DeltaTable(path).get_add_actions(flatten=True))
    buckets = [int(b) for b in actions.column("partition.__bucket").to_pylist()]
    return {b: buckets.count(b) for b in sorted(set(buckets))}


def _backdate(path: Path, hours: float) -> None:
    then = time.time() - hours * 3600
    os.utime(path, (then, then))


def _orphan(path: str, hours_old: float) -> Path:
    """A data file no version references (a lost commit race's), unreferenced for ``hours_old``."""
    orphan = Path(path) / "__bucket=0" / f"part-{uuid.uuid4().hex}.parquet"
    pq.write_table(_rows(9000, 2).drop(["__bucket"]), orphan)
    _backdate(orphan, hours_old)
    return orphan


class Clock:
    """The maintainer's clock, in seconds, moved by the test instead of sleeping."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _maintainer(lake: Lake, clock: Clock | None = None) -> LakeMaintainer:
    return LakeMaintainer(lake, JOB, CONFIG, epoch=3, parallelism=4, clock=clock or Clock())


def _tables(tmp_path: Path, *names: str) -> tuple[Lake, dict[str, str]]:
    """Tables ``names``, each of eight rounds (eight small files per bucket): the lake and their paths."""
    return Lake.at(str(tmp_path / "lake")), {name: _tiered(tmp_path, table=name)[1] for name in names}


def _rows_of(path: str) -> list[dict]:
    return sorted(delta_rows(path).to_pylist(), key=lambda row: row["id"])


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
    assert DeltaTable(path).metadata().configuration[f"kvTiering.fenceEpoch.{JOB}"] == "3"
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
    assert set().union(*(codecs(pq.read_metadata(f)) for f in files)) == {
        {"snappy": "SNAPPY", "lz4": "LZ4"}[compression]
    }


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
    old, fresh = _orphan(path, 25), _orphan(path, 0)
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
    add = AddAction(
        path=rel,
        size=os.path.getsize(f"{path}/{rel}"),
        partition_values={"__bucket": str(bucket)},
        modification_time=int(time.time() * 1000),
        data_change=True,
        stats=f'{{"numRecords": {len(ids)}}}',
    )
    schema = Schema.from_arrow(pa.schema([("id", pa.int64()), ("__bucket", pa.int32()), ("__offset", pa.int64())]))
    position = LakePosition(1, {b: round_id * 10 for b in range(BUCKETS)})
    meta = commit_metadata(job=JOB, position=position, epoch=epoch, round_id=round_id, lease_id="l", snapshots={})
    dt.create_write_transaction(
        [add],
        "overwrite",
        schema,
        partition_by=["__bucket"],
        partition_filters=[("__bucket", "in", [str(bucket)])],
        commit_properties=CommitProperties(
            custom_metadata=meta, app_transactions=[Transaction(app_id(JOB, TABLE), txn_version(epoch, round_id))]
        ),
    )


def test_compaction_losing_a_race_with_a_round_on_its_bucket_fails_and_the_round_wins(tmp_path, monkeypatch):
    lake, path = _tiered(tmp_path, rounds=6)
    DeltaTable(path).alter.set_table_properties(
        {  # as a pass of this term left them: no property commit now
            "delta.checkpointInterval": "5",
            "delta.logRetentionDuration": "interval 720 hours",
            "delta.deletedFileRetentionDuration": "interval 24 hours",
            f"kvTiering.fenceEpoch.{JOB}": "3",
        },
        raise_if_not_exists=False,
    )
    stale = DeltaTable(path)
    _overwrite_bucket(DeltaTable(path), path, 0, [0, 2, 4], epoch=3, round_id=7)  # lands first
    expected = _ids(path)
    monkeypatch.setattr("tiering.writers.maintenance.open_table", lambda *a, **k: stale)

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


def test_a_pass_covers_every_table_first_then_only_those_rounds_committed_to_since(tmp_path):
    lake, paths = _tables(tmp_path, "a", "b", "c")
    maintainer = _maintainer(lake)

    first = maintainer.run(sorted(paths))

    assert first.ok and list(first.done) == ["a", "b", "c"] and first.skipped == []
    assert all(done.compacted == (0, 1) for done in first.done.values()), "a new maintainer covers every table"
    for name in ("a", "b"):  # rounds 9-11 land on a and b; only a's reach the maintainer
        _tiered(tmp_path, rounds=3, table=name, first=9)
    maintainer.changed(["a"])
    versions, rows = {n: DeltaTable(p).version() for n, p in paths.items()}, {n: _rows_of(p) for n, p in paths.items()}

    second = maintainer.run(sorted(paths))

    assert second.ok and list(second.done) == ["a", "b", "c"] and second.skipped == ["b", "c"]
    done = second.done["a"]
    assert (done.skipped, done.compacted, done.version_before) == ("", (0, 1), versions["a"])
    assert DeltaTable(paths["a"]).version() > versions["a"] and _files_per_bucket(paths["a"]) == {0: 1, 1: 1}
    for name in ("b", "c"):
        assert second.done[name].skipped.startswith("unchanged: no round committed to it since this term maintained it")
        assert DeltaTable(paths[name]).version() == versions[name], f"{name}: not even a property commit"
    assert _files_per_bucket(paths["b"]) == {0: 4, 1: 4}, "b's rounds never reached the maintainer: left alone"
    assert {n: _rows_of(p) for n, p in paths.items()} == rows
    assert str(second).startswith("tables maintained 1 skipped 2 failed 0 in ")


def test_a_table_no_round_changed_is_maintained_again_once_the_revisit_bound_passed(tmp_path):
    lake, path = _tiered(tmp_path)
    clock = Clock()
    maintainer = _maintainer(lake, clock)
    maintainer.run([TABLE])
    orphan = _orphan(path, 25)  # deletable now, and no round will bring the maintainer back to the table

    bound = revisit_after(TABLE)
    assert REVISIT_S / 2 <= bound <= REVISIT_S

    clock.now = bound - 1
    assert f"maintained it {bound - 1:.0f}s ago" in maintainer.run([TABLE]).done[TABLE].skipped
    assert orphan.exists()

    clock.now = bound
    done = maintainer.run([TABLE]).done[TABLE]
    assert (done.skipped, done.vacuumed) == ("", 1), "vacuum does not starve on an unchanged table"
    assert not orphan.exists()

    clock.now = bound * 2 - 1
    assert maintainer.run([TABLE]).done[TABLE].skipped, "the bound counts from the table's last full pass"


def test_idle_tables_maintained_together_come_back_spread_over_half_the_bound():
    bounds = [revisit_after(f"t{i:04d}") for i in range(1000)]
    assert REVISIT_S / 2 <= min(bounds) and max(bounds) <= REVISIT_S
    late = sum(b > REVISIT_S * 0.75 for b in bounds)
    assert 400 < late < 600, "about half in each quarter of an hour"


def test_compactions_run_one_at_a_time_while_the_other_tables_steps_go_on(tmp_path, monkeypatch):
    lake, paths = _tables(tmp_path, "a", "b", "c")
    paths["small"] = _tiered(tmp_path, rounds=1, table="small")[1]  # one file per bucket: nothing to compact
    rows = {name: _rows_of(path) for name, path in paths.items()}
    compact, checkpoint = LakeMaintainer._compact, LakeMaintainer._checkpoint
    counts, started, overlapped = {"running": 0, "most": 0, "done": 0}, threading.Event(), threading.Event()
    lock = threading.Lock()

    def counted_compact(self, *args):
        with lock:
            counts["running"] += 1
            counts["most"] = max(counts["most"], counts["running"])
        started.set()
        try:
            overlapped.wait(5)  # the small table's steps go on meanwhile, on another thread
            time.sleep(0.2)  # room for another compaction to start, were it let
            return compact(self, *args)
        finally:
            with lock:
                counts["running"] -= 1
                counts["done"] += 1

    def watched_checkpoint(self, path, *args):
        if path == paths["small"] and started.wait(5):
            with lock:
                if counts["running"]:
                    overlapped.set()
        return checkpoint(self, path, *args)

    monkeypatch.setattr(LakeMaintainer, "_compact", counted_compact)
    monkeypatch.setattr(LakeMaintainer, "_checkpoint", watched_checkpoint)

    result = _maintainer(lake).run(sorted(paths))

    assert result.ok and list(result.done) == ["a", "b", "c", "small"]
    assert (counts["done"], counts["most"]) == (3, 1), "three compactions, never two at once"
    assert overlapped.is_set(), "the small table was maintained while a compaction ran"
    assert [result.done[n].compacted for n in ("a", "b", "c", "small")] == [(0, 1), (0, 1), (0, 1), ()]
    assert {n: _files_per_bucket(p) for n, p in paths.items()} == {n: {0: 1, 1: 1} for n in paths}
    assert {n: _rows_of(p) for n, p in paths.items()} == rows, "every row as it was"


def test_a_failing_table_is_recorded_and_tried_again_next_pass_while_the_others_are_maintained(tmp_path):
    lake, paths = _tables(tmp_path, "a", "broken", "c")
    maintainer = _maintainer(lake)
    assert maintainer.run(sorted(paths)).ok
    for name in ("a", "broken"):  # rounds land on a and broken, whose log then breaks
        _tiered(tmp_path, rounds=3, table=name, first=9)
    (Path(paths["broken"]) / "_delta_log" / f"{DeltaTable(paths['broken']).version() + 1:020d}.json").write_text("{")
    maintainer.changed(["a", "broken"])

    second = maintainer.run(sorted(paths))

    assert not second.ok and list(second.failed) == ["broken"] and "DeltaError" in second.failed["broken"]
    assert list(second.done) == ["a", "c"] and second.skipped == ["c"]
    assert second.done["a"].compacted == (0, 1) and _files_per_bucket(paths["a"]) == {0: 1, 1: 1}
    third = maintainer.run(sorted(paths))
    assert list(third.failed) == ["broken"] and third.skipped == ["a", "c"], "the failed table is tried again"


def test_a_lost_term_stops_the_pass_and_is_raised(tmp_path):
    lake, paths = _tables(tmp_path, "a", "newer")
    _round(paths["newer"], 5, 9, _rows(5000, 4), table="newer")  # a newer term's round

    with pytest.raises(FencedEpochError, match="table 'newer': epoch 5 already wrote"):
        _maintainer(lake).run(sorted(paths))
