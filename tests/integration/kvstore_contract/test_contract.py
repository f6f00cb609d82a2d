"""The store seam's contract (tiering/kvstore/contract.py), the same tests against the reference store
and a real Apache Fluss cluster, each written through its own write API.

What must hold for one job to tier either: tables carry their schema, key, bucket count and an id
that a re-created table changes; every bucket's log end moves with writes; a changelog range reads
back its changes' kinds at increasing offsets inside the range and replays to the table; the latest
snapshot of a bucket covers a log offset and its rows are the table's rows at that offset; the
lease keeps a snapshot past the store's retention and lets it go after a release, and after a
drop; a stale epoch is refused.
"""

from __future__ import annotations

import pickle
import uuid
from collections import defaultdict
from collections.abc import Iterator

import pyarrow as pa
import pytest

from tests.support.store_sides import SNAPSHOT_WAIT, FlussSide, ReferenceSide
from tests.support.waiting import wait_until
from tiering.errors import FencedEpochError, TableNotFoundError
from tiering.kvstore.contract import BucketId, BucketReader, LakeProgress, PlanningStore, StoreTable
from tiering.kvstore.protocol import DELETE, INSERT, OFFSET_COLUMN, OP_COLUMN, UPDATE
from tiering.kvstore.server.process import StoreProcess

pytestmark = pytest.mark.integration

LEASE_MS = 120_000


@pytest.fixture(scope="module", params=["reference", "fluss"])
def side(request, tmp_path_factory) -> Iterator[ReferenceSide | FlussSide]:
    if request.param == "reference":
        process = StoreProcess.start(tmp_path_factory.mktemp("kvstore"), num_retained=2, gc_interval_s=0.5)
        made: ReferenceSide | FlussSide = ReferenceSide(process.client())
    else:
        pytest.importorskip("fluss")
        process = request.getfixturevalue("fluss_cluster")
        made = FlussSide(process, f"contract_{uuid.uuid4().hex[:8]}")
    yield made
    made.close()
    if request.param == "reference":
        process.stop()


def row(key: int, version: int = 0) -> dict:
    return {"id": key, "note": f"note-{key}-v{version}", "amount": key + version / 4}


def new_table(side, buckets: int = 2) -> str:
    table = f"t_{uuid.uuid4().hex[:8]}"
    side.create_table(table, buckets)
    return table


def changelog(reader: BucketReader, table: StoreTable, bucket: int, start: int, end: int) -> pa.Table:
    schema = None
    batches = list(reader.changelog(table, bucket, start, end))
    if batches:
        schema = batches[0].schema
    return pa.Table.from_batches(batches, schema) if batches else pa.table({OFFSET_COLUMN: pa.array([], pa.int64())})


def replay(state: dict[int, dict], changes: pa.Table) -> dict[int, dict]:
    names = ("id", "note", "amount")
    for change in changes.to_pylist():
        if change[OP_COLUMN] == DELETE:
            state.pop(change["id"], None)
        else:
            state[change["id"]] = {n: change[n] for n in names}
    return state


def test_the_store_and_its_reader_are_the_seams_and_the_reader_pickles(side):
    assert isinstance(side.store, PlanningStore)
    assert isinstance(side.reader, BucketReader)
    table = new_table(side)
    side.write(table, [row(1)])
    info = side.store.table(table)
    end = side.store.log_ends([table])[table].buckets

    copy = pickle.loads(pickle.dumps(side.store.bucket_reader()))  # as a Spark task gets it
    read = [changelog(copy, info, b, 0, log.end).num_rows for b, log in end.items()]
    close = getattr(copy, "close", None)
    if close:
        close()
    assert sum(read) == 1


def test_tables_carry_schema_key_buckets_and_an_id_a_re_created_table_changes(side):
    store: PlanningStore = side.store
    table = new_table(side, buckets=3)

    found = store.table(table)
    assert [(c.name, c.spark_type) for c in found.columns] == [
        ("id", "bigint"),
        ("note", "string"),
        ("amount", "double"),
    ]
    assert found.primary_key == ("id",) and found.num_buckets == 3
    assert found.arrow_schema.field("id").type == pa.int64() and not found.arrow_schema.field("id").nullable
    assert table in {t.name: t for t in store.tables()}
    assert set(store.log_ends([table, "absent"])) == {table}
    with pytest.raises(TableNotFoundError):
        store.table("absent")
    with pytest.raises(TableNotFoundError):
        store.latest_snapshots("absent")

    side.drop_table(table)
    side.create_table(table, 3)
    assert store.table(table).table_id != found.table_id
    assert store.log_ends([table])[table].table_id == store.table(table).table_id


def test_log_ends_move_with_writes_and_a_changelog_range_reads_kinds_and_offsets(side):
    store, reader = side.store, side.reader
    table = new_table(side)
    info = store.table(table)
    before = store.log_ends([table])[table]
    assert before.table_id == info.table_id and sorted(before.buckets) == [0, 1]
    assert all(log.start == log.end == 0 for log in before.buckets.values())

    side.write(table, [row(k) for k in range(1, 9)])
    side.write(table, [row(k, 1) for k in (1, 2)], deletes=(3, 99))
    after = store.log_ends([table])[table]

    kinds: dict[int, list[str]] = defaultdict(list)
    state: dict[int, dict] = {}
    for bucket, log in after.buckets.items():
        changes = changelog(reader, info, bucket, log.start, log.end)
        offsets = changes[OFFSET_COLUMN].to_pylist()
        assert offsets == sorted(set(offsets)) and all(log.start <= o < log.end for o in offsets), offsets
        assert log.end > before.buckets[bucket].end or not offsets
        for change in changes.to_pylist():
            kinds[change["id"]].append(change[OP_COLUMN])
        replay(state, changes)
        if len(offsets) > 1:  # a range from the middle holds what follows, nothing before
            assert changelog(reader, info, bucket, offsets[1], log.end)[OFFSET_COLUMN].to_pylist() == offsets[1:]
    assert {k: kinds[k] for k in (1, 3, 4)} == {1: [INSERT, UPDATE], 3: [INSERT, DELETE], 4: [INSERT]}
    assert 99 not in kinds
    assert state == {k: row(k, 1 if k in (1, 2) else 0) for k in (1, 2, 4, 5, 6, 7, 8)}


def test_the_latest_snapshot_covers_an_offset_and_holds_the_table_at_that_offset(side):
    store, reader = side.store, side.reader
    table = new_table(side)
    side.write(table, [row(k) for k in range(1, 13)])
    side.write(table, [row(k, 2) for k in range(1, 5)], deletes=(11, 12))
    info = store.table(table)

    snapshots = side.fresh_snapshots(table)
    ends = store.log_ends([table])[table].buckets
    seen: dict[int, dict] = {}
    for bucket, ref in snapshots.items():
        assert ref.table_id == info.table_id and ref.bucket == bucket
        assert 0 < ref.log_offset <= ends[bucket].end
        rows = pa.Table.from_batches(list(reader.snapshot_rows(info, ref)), info.arrow_schema).to_pylist()
        at_offset = replay({}, changelog(reader, info, bucket, 0, ref.log_offset))
        assert sorted(rows, key=lambda r: r["id"]) == [at_offset[k] for k in sorted(at_offset)]
        seen.update(at_offset)
    assert seen == {k: row(k, 2 if k <= 4 else 0) for k in range(1, 11)}


def test_the_lease_keeps_a_snapshot_past_retention_until_released_or_dropped(side):
    store, reader = side.store, side.reader
    table = new_table(side, buckets=1)
    side.write(table, [row(k) for k in range(1, 5)])
    info = store.table(table)
    lease = f"contract-{uuid.uuid4().hex}"

    def newer_snapshots(count: int, key: int) -> list:
        refs = []
        for version in range(1, count + 1):
            side.write(table, [row(key, version)])
            refs.append(side.fresh_snapshots(table)[0])
        return refs

    def gone(ref) -> None:
        wait_until(lambda: not store.snapshot_available(table, ref), f"snapshot {ref} collected", **SNAPSHOT_WAIT)

    held = side.fresh_snapshots(table)[0]
    held_rows = pa.Table.from_batches(list(reader.snapshot_rows(info, held))).to_pylist()
    store.create(lease, 2, LEASE_MS)
    assert store.acquire(lease, 2, LEASE_MS, [held]) == []
    newer = newer_snapshots(3, key=1)  # more than the 2 retained
    store.renew(lease, 2, LEASE_MS)
    gone(newer[0])  # an unheld one older than the retained: collected
    assert store.snapshot_available(table, held)
    assert pa.Table.from_batches(list(reader.snapshot_rows(info, held))).to_pylist() == held_rows
    with pytest.raises(FencedEpochError):
        store.acquire(lease, 1, LEASE_MS, [newer[-1]])

    store.release(lease, 2, [BucketId(info.table_id, 0)])
    newer_snapshots(1, key=2)
    gone(held)
    assert store.acquire(lease, 2, LEASE_MS, [held]) == [held], "a collected snapshot is unavailable"

    dropped = newer_snapshots(1, key=3)[0]
    assert store.acquire(lease, 2, LEASE_MS, [dropped]) == []
    newer_snapshots(3, key=4)
    assert store.snapshot_available(table, dropped)
    store.drop(lease, 2)
    newer_snapshots(1, key=5)
    gone(dropped)


def test_the_optional_parts_answer_or_say_the_store_has_none(side):
    """Holds listed, the lake's progress taken and read back, files named: where the store has
    them, they answer for the same objects as the rest; where it has none, it says None."""
    store: PlanningStore = side.store
    table = new_table(side, buckets=1)
    side.write(table, [row(k) for k in range(1, 4)])
    info = store.table(table)
    ref = side.fresh_snapshots(table)[0]
    lease = f"contract-{uuid.uuid4().hex}"
    assert table in store.log_ends() and store.log_ends()[table].reported is None

    store.create(lease, 1, LEASE_MS)
    assert store.acquire(lease, 1, LEASE_MS, [ref]) == []
    held = store.held(lease)
    assert held is None or held == [BucketId(info.table_id, 0)]
    store.drop(lease, 1)
    assert store.held(lease) in (None, [])

    end = store.log_ends([table])[table].buckets[0].end
    progress = store.lake_progress
    if progress is not None:
        answer = progress.report({table: LakeProgress(info.table_id, 1, 0, {0: end}, job="contract-job")})
        assert answer == {table: None}
        reported = store.log_ends([table])[table].reported
        assert reported is not None and (reported.offsets, reported.job) == ({0: end}, "contract-job")

    files = store.files
    if files is not None:
        assert files.snapshot_files(table, ref)
        found = files.log_files({table: [(0, 0, end)]})[table]
        assert not isinstance(found, Exception) and len(found) == 1 and found[0]
    assert (progress is None, files is None, held is None) == (side.name == "fluss",) * 3


def test_releasing_buckets_the_lease_never_held_is_no_error(side):
    """A new term lets go of every bucket no replayed split needs, held or not (a store that lists
    no holds cannot tell which are): a release of buckets the lease never held, of a table it holds
    one other bucket of and of a table it holds nothing of, changes nothing and raises nothing."""
    store: PlanningStore = side.store
    held_table, other = new_table(side, buckets=2), new_table(side, buckets=2)
    side.write(held_table, [row(k) for k in range(1, 9)])
    ref = side.fresh_snapshots(held_table)[0]
    lease = f"contract-{uuid.uuid4().hex}"
    store.create(lease, 1, LEASE_MS)
    assert store.acquire(lease, 1, LEASE_MS, [ref]) == []

    other_id = store.table(other).table_id
    store.release(lease, 1, [BucketId(ref.table_id, 1), BucketId(other_id, 0), BucketId(other_id, 1)])

    assert store.held(lease) in (None, [BucketId(ref.table_id, 0)])
    store.release(lease, 1, [BucketId(ref.table_id, 0)])
    store.drop(lease, 1)
