"""Every path that applies a bucket's changelog to its base ends with the same rows.

The same random changelogs (inserts, updates, deletes, one key changed many times, deletes of
absent keys, one- and two-column keys) on a random base go to: the store's own snapshot
(``live_state``), the bucket rewrite on an executor and in the driver (``run_task``), the
MERGE whose source ``merge_batches`` builds (``merge_round`` on a real Delta table), and the
Spark rows of the delta-spark writer (``bucket_rows``). Each is compared with a plain-Python
model of the changelog: the newest change of a key wins, a ``-D`` leaves no row.

A lake base is a bucket of several files — key-sorted ones with ranges apart, or files of
arbitrary rows whose ranges overlap (as byte-copied snapshot files are) — and the rewrites go
by file: the bucket after the round is the files they did not replace plus the ones they wrote,
at a file target small enough to split a rewrite into several files.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import Schema
from deltalake.transaction import CommitProperties, create_table_with_add_actions
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.support.store_files import ts, write_log, write_snapshot
from tiering.delta_log.lake import Lake, LakeFile
from tiering.delta_log.layout import BUCKET_COLUMN, lake_schema
from tiering.kvstore.contract import StoreTable
from tiering.kvstore.models import LogSegment, Snapshot, TableInfo
from tiering.kvstore.protocol import DELETE, INSERT, OFFSET_COLUMN, OPS, TIMESTAMP_COLUMN, TIMESTAMP_TYPE, UPDATE
from tiering.kvstore.reference import store_table
from tiering.kvstore.server.files import live_state
from tiering.writers.bucket_plan import BucketBase, BucketPlan
from tiering.writers.bucket_rows import bucket_rows
from tiering.writers.buckets import BucketResult, BucketTask, run_task, write_bucket
from tiering.writers.change_feed import merge_round
from tiering.writers.executor_writes import run_bucket_tasks
from tiering.writers.round_writer import PreparedRound

pytestmark = pytest.mark.integration

#: The tables as the store describes them (its own snapshot reads them so) and as the lake has them
INFOS = {
    info.name: info
    for info in (
        TableInfo(
            name="one",
            table_id=1,
            num_buckets=1,
            primary_key=["id"],
            schema=[{"name": "id", "type": "bigint"}, {"name": "v", "type": "string"}, {"name": "n", "type": "bigint"}],
        ),
        TableInfo(
            name="two",
            table_id=2,
            num_buckets=1,
            primary_key=["id", "part"],
            schema=[
                {"name": "id", "type": "bigint"},
                {"name": "part", "type": "string"},
                {"name": "v", "type": "string"},
            ],
        ),
    )
}
ONE, TWO = store_table(INFOS["one"]), store_table(INFOS["two"])
#: A row as every path is compared: key -> (other columns..., __offset, __timestamp in µs).
Rows = dict[tuple, tuple]


@dataclass(frozen=True)
class Case:
    """One bucket: ``base`` rows (written by offsets 0..), then ``segments`` of (op, row) changes,
    and whether the lake writers find the base in a snapshot or in the lake."""

    table: StoreTable
    base: tuple[dict, ...]
    segments: tuple[tuple[tuple[str, dict], ...], ...]
    base_kind: str
    #: a lake base's files: how many, and whether they are key-sorted (else rows as drawn)
    files: int = 1
    sorted_files: bool = True
    #: the file target of the rewrites (1: a file per row)
    target_file_bytes: int = 1 << 30

    @property
    def log_from(self) -> int:
        return len(self.base)

    @property
    def log_to(self) -> int:
        return self.log_from + sum(map(len, self.segments))

    def changes(self) -> list[list[tuple[int, str, dict]]]:
        """Per segment: (offset, op, row), a delete's row holding only the key."""
        out, offset = [], self.log_from
        for segment in self.segments:
            out.append(
                [(offset + i, op, self._key(row) if op == DELETE else row) for i, (op, row) in enumerate(segment)]
            )
            offset += len(segment)
        return out

    def expected(self) -> Rows:
        rows = {self._id(r): (r, o) for o, r in enumerate(self.base)}
        for offset, op, row in (c for segment in self.changes() for c in segment):
            if op == DELETE:
                rows.pop(self._id(row), None)
            else:
                rows[self._id(row)] = (row, offset)
        values = [c.name for c in self.table.columns if c.name not in self.table.primary_key]
        return {k: (*(r[c] for c in values), o, _micros(o)) for k, (r, o) in rows.items()}

    def _key(self, row: dict) -> dict:
        return {k: row[k] for k in self.table.primary_key}

    def _id(self, row: dict) -> tuple:
        return tuple(row[k] for k in self.table.primary_key)


def _micros(offset: int) -> int:
    return round(ts(offset).timestamp() * 1_000_000)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    table = draw(st.sampled_from([ONE, TWO]))
    ids = st.integers(0, 4)
    text = st.none() | st.text("xyz", max_size=2)
    if table is ONE:
        rows = st.builds(lambda i, v, n: {"id": i, "v": v, "n": n}, ids, text, st.none() | st.integers(-3, 3))
    else:
        rows = st.builds(lambda i, p, v: {"id": i, "part": p, "v": v}, ids, st.sampled_from(["a", "b"]), text)
    base = draw(st.lists(rows, max_size=6, unique_by=lambda r: tuple(r[k] for k in table.primary_key)))
    segments = draw(st.lists(st.lists(st.tuples(st.sampled_from(OPS), rows), min_size=1, max_size=6), max_size=3))
    return Case(
        table,
        tuple(base),
        tuple(tuple(s) for s in segments),
        draw(st.sampled_from(["snapshot", "lake"])),
        files=draw(st.integers(1, 3)),
        sorted_files=draw(st.booleans()),
        target_file_bytes=draw(st.sampled_from([1, 1 << 30])),
    )


def _row(i: int, v: str | None) -> dict:
    return {"id": i, "v": v, "n": i}


#: One key changed many times across segments, a delete of an absent key, a re-insert after a delete.
MANY_TIMES = Case(
    ONE,
    (_row(1, "a"), _row(2, "b")),
    (
        ((UPDATE, _row(1, "a1")), (DELETE, _row(9, None)), (UPDATE, _row(1, "a2"))),
        ((DELETE, _row(1, None)), (INSERT, _row(1, "a3")), (DELETE, _row(2, None))),
        ((UPDATE, _row(1, "a4")),),
    ),
    "lake",
)
#: A bucket of three key-sorted files: changes land in the first and the last, a new key between
#: two ranges joins the nearest file, a delete of a key no range covers changes nothing.
SOME_FILES = Case(
    ONE,
    tuple(_row(i, "b") for i in (0, 1, 4, 5, 8, 9)),
    (((UPDATE, _row(1, "c")), (INSERT, _row(6, "n")), (DELETE, _row(3, None)), (DELETE, _row(9, None))),),
    "lake",
    files=3,
    sorted_files=True,
    target_file_bytes=1,
)
#: Overlapping files (rows as drawn): a changed key goes from every file whose range covers it.
OVERLAPPING = Case(
    ONE,
    tuple(_row(i, "b") for i in (0, 9, 4, 1, 8, 5)),
    (((UPDATE, _row(4, "c")), (INSERT, _row(10, "n"))),),
    "lake",
    files=2,
    sorted_files=False,
)
#: Two-column keys sharing an ``id``: only the changed (id, part) moves.
COMPOSITE = Case(
    TWO,
    ({"id": 1, "part": "a", "v": "x"}, {"id": 1, "part": "b", "v": "y"}),
    (
        (
            (DELETE, {"id": 1, "part": "a", "v": None}),
            (UPDATE, {"id": 1, "part": "b", "v": "z"}),
            (INSERT, {"id": 2, "part": "a", "v": None}),
            (DELETE, {"id": 3, "part": "b", "v": None}),
        ),
    ),
    "snapshot",
)


@settings(max_examples=15, deadline=None, database=None)
@example(MANY_TIMES)
@example(COMPOSITE)
@example(SOME_FILES)
@example(OVERLAPPING)
@given(case=cases())
def test_every_path_applies_a_changelog_to_its_base_alike(spark, tmp_path_factory, case: Case):
    directory = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    lake = Lake.at(str(directory / "lake"))
    table, uri = case.table, lake.path(case.table.name)
    snapshot = write_snapshot(directory / "store", table, [(r, o) for o, r in enumerate(case.base)])
    logs = [write_log(directory / "store", table, changes) for changes in case.changes()]
    lake_files = _lake_table(lake, table, _file_layout(directory / "store", case))
    base_files = (snapshot,) if case.base_kind == "snapshot" else tuple(f.uri for f in lake_files)
    plan = BucketPlan(
        bucket=0,
        base=BucketBase(case.base_kind),
        base_files=base_files,
        log_files=tuple(logs),
        log_from=case.log_from,
        log_to=case.log_to,
        lake_files=lake_files if case.base_kind == "lake" else (),
    )
    task = BucketTask(table, uri, plan, lake.store, case.target_file_bytes)
    segments = [
        LogSegment(start_offset=c[0][0], end_offset=c[-1][0] + 1, file=f)
        for c, f in zip(case.changes(), logs, strict=False)
    ]
    store_snapshot = Snapshot(
        bucket=0, snapshot_id=1, log_offset=case.log_from, files=[snapshot], row_count=len(case.base), size_bytes=1
    )
    (executors,) = run_bucket_tasks(spark, [task])[table.name]

    paths = {
        "store snapshot": live_state(INFOS[table.name], store_snapshot, segments),
        "executor rewrite": _written(task, executors),
        "driver rewrite": _written(task, run_task(task)),
        "Spark rows": bucket_rows(spark, table, [plan]).toArrow(),
        "MERGE source": _merged(lake, table, task),  # last: it commits to the table the others read
    }

    expected = case.expected()
    assert {name: _rows(table, data) for name, data in paths.items()} == dict.fromkeys(paths, expected)


def _file_layout(directory: Path, case: Case) -> list[str]:
    """The base as ``case.files`` snapshot files: consecutive keys each (ranges apart), or rows
    as drawn (ranges that may overlap)."""
    rows = [(r, o) for o, r in enumerate(case.base)]
    if case.sorted_files:
        rows.sort(key=lambda item: tuple(item[0][k] for k in case.table.primary_key))
    size = -(-len(rows) // case.files) or 1
    return [write_snapshot(directory, case.table, rows[i : i + size]) for i in range(0, max(len(rows), 1), size)]


def _lake_table(lake: Lake, table: StoreTable, snapshots: list[str]) -> tuple[LakeFile, ...]:
    """A Delta table holding the base in bucket 0, each snapshot file copied into it as a
    bootstrap writes it (ranges from its footer); its data files as a round plans them."""
    plan = BucketPlan(
        bucket=0, base=BucketBase.SNAPSHOT, base_files=tuple(snapshots), log_files=(), log_from=0, log_to=0
    )
    written = write_bucket(BucketTask(table, lake.path(table.name), plan, lake.store))
    create_table_with_add_actions(
        lake.path(table.name),
        Schema.from_arrow(lake_schema(table)),
        [f.add_action() for f in written],
        mode="error",
        partition_by=[BUCKET_COLUMN],
    )
    return tuple(lake.load(table.name).files_by_bucket(table.primary_key[0]).get(0, ()))


def _written(task: BucketTask, result: BucketResult) -> pa.Table:
    """The bucket after a rewrite: the lake files it did not replace, and the files it wrote."""
    assert result.error is None, result.error
    kept = [f.uri for f in task.plan.lake_files if f.path not in result.replaced]
    parts = [pq.read_table(uri) for uri in kept] + [pq.read_table(f"{task.table_uri}/{f.path}") for f in result.files]
    return pa.concat_tables(parts) if parts else pa.table({})


def _merged(lake: Lake, table: StoreTable, task: BucketTask) -> pa.Table:
    loaded = lake.load(table.name)
    prepared = PreparedRound(
        table=table,
        path=loaded.path,
        app="test",
        version=1,
        epoch=1,
        dt=loaded.dt,
        replace_table=False,
        plans=(task.plan,),
        positions={0: task.plan.position},
        metadata={},
        lake_buckets=frozenset({0}),
    )
    merge_round(prepared, [task], CommitProperties(), lake.compression)
    return lake.load(table.name).to_arrow()


def _rows(table: StoreTable, data: pa.Table) -> Rows:
    """``data``'s rows by key; a key twice fails."""
    if not data.num_rows:
        return {}
    stamps = data[TIMESTAMP_COLUMN].cast(TIMESTAMP_TYPE).cast(pa.int64())
    data = data.set_column(data.schema.get_field_index(TIMESTAMP_COLUMN), TIMESTAMP_COLUMN, stamps)
    keys = table.primary_key
    values = [c.name for c in table.columns if c.name not in keys] + [OFFSET_COLUMN, TIMESTAMP_COLUMN]
    rows = data.to_pylist()
    out = {tuple(r[k] for k in keys): tuple(r[c] for c in values) for r in rows}
    assert len(out) == len(rows), f"a key twice in {rows}"
    return out
