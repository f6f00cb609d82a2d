"""The round commit protocol against every lake writer and every storage: real Delta tables,
real Spark and store-shaped Parquet files (docs/DESIGN.md §6: "same protocol, same tests").

Writers: delta-rs rewriting the round's buckets (executors write the files), delta-rs merging a
small changelog round in the driver, delta-rs with the change data feed on (a round that changes
lake rows is one MERGE; its feed is checked in test_change_feed.py), and delta-spark (where the
Delta jars are on Spark's classpath, as scripts/test_delta.sh puts them; skipped, with the reason,
elsewhere). Storage: a local directory and a real S3 server (SeaweedFS on loopback), but delta-spark
only on the local one: it is refused on S3 (conftest.py). Tests of one data path only say so in
their name.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from decimal import Decimal

import pyarrow.fs as pafs
import pytest
from deltalake import DeltaTable

from tests.support.delta_spark import DeltaReader, assert_versions_read_alike
from tests.support.store_files import ts, write_log, write_snapshot
from tests.support.writers import (
    JOB,
    ORDERS,
    WRITER_PARAMS,
    WRITERS,
    WRITTEN_BY,
    commit,
    log_entry,
    orders_rows,
    row,
    skip_without_delta_jars,
)
from tiering.delta_log.lake import Lake, has_deletion_vectors
from tiering.delta_log.layout import app_id, fence_property, txn_version
from tiering.enumerator.positions import LakePosition
from tiering.enumerator.splits import LogSplit, SnapshotSplit, sort_key
from tiering.errors import FencedEpochError, LakeCommitError, NotLeaderError, SchemaMismatchError
from tiering.kvstore.contract import StoreColumn, StoreTable
from tiering.kvstore.models import Column, TableInfo
from tiering.kvstore.reference import store_table
from tiering.kvstore.types import arrow_type
from tiering.writers import delta_rs_writer
from tiering.writers.delta_rs_writer import DeltaRsRoundWriter
from tiering.writers.delta_spark_writer import DeltaSparkRoundWriter
from tiering.writers.round_writer import RoundWriter
from tiering.writers.table_fence import fence_table

pytestmark = pytest.mark.integration


def delta(lake: Lake, table: str = "orders"):
    """The table's Delta log as it is now."""
    return lake.load(table).dt


def bucket_files(lake: Lake, bucket: int) -> set[str]:
    return {u for u in delta(lake).file_uris() if f"__bucket={bucket}/" in u}


def data_files(lake: Lake, table: str = "orders") -> set[str]:
    """Every Parquet file under the table's directory, referenced or not, as URIs."""
    store = lake.store
    found = store.filesystem.get_file_info(pafs.FileSelector(store.path(lake.path(table)), recursive=True))
    prefix = "s3://" if store.is_s3 else ""
    return {prefix + f.path for f in found if f.path.endswith(".parquet") and "_delta_log" not in f.path}


def build(kind: str, spark, lake: Lake, **attrs) -> RoundWriter:
    """The writer ``kind`` (a subclass of it with ``attrs`` overridden, for seams); the kind
    ``delta-spark-replace`` is delta-spark rewriting buckets (``lake.delta_spark_write``)."""
    spark_write = {"delta-spark": "merge", "delta-spark-replace": "replace"}.get(kind)
    cls = DeltaSparkRoundWriter if spark_write else DeltaRsRoundWriter
    cls = type(f"Test{cls.__name__}", (cls,), attrs) if attrs else cls
    if spark_write:
        return cls(spark, lake, JOB, write=spark_write)
    driver_max_changes = dict(WRITERS)[kind]
    return cls(spark, lake, JOB, driver_max_changes=driver_max_changes, change_data_feed=kind == "delta-rs-feed")


@pytest.fixture(params=WRITER_PARAMS)
def kind(request, spark, lake) -> str:
    if request.param == "delta-spark":
        skip_without_delta_jars(spark)
    if request.param == "delta-rs-feed" and lake.store.is_s3:
        pytest.skip("the feed's MERGE on S3 is covered by test_change_feed.py")
    return request.param


@pytest.fixture
def writer(kind, spark, lake):
    return build(kind, spark, lake)


@pytest.fixture
def round1(tmp_path):
    """Bucket 0: snapshot + log (updates, deletes, a delete of an absent key, and rows outside
    the split's range in the same segment); bucket 1: snapshot only; bucket 2: log only."""
    d = tmp_path / "store"
    snap0 = write_snapshot(d, ORDERS, [(row(1, "a"), 2), (row(2, "b"), 5), (row(3, "c"), 9)])
    log0 = write_log(
        d,
        ORDERS,
        [
            (7, "+I", row(99, "below range")),
            (10, "+U", row(2, "b2", "2.50")),
            (11, "-D", {"id": 3}),
            (12, "+I", row(4, "d")),
            (13, "+U", row(4, "d2")),
            (14, "-D", {"id": 5}),
            (16, "+I", row(98, "above range")),
        ],
    )
    snap1 = write_snapshot(d, ORDERS, [(row(10, "x"), 1)])
    log2 = write_log(d, ORDERS, [(0, "+I", row(20, "p")), (1, "+I", row(21, "q")), (2, "-D", {"id": 20})])
    files = {
        SnapshotSplit("orders", 0, 1, snapshot_id=4, log_offset=10): [snap0],
        LogSplit("orders", 0, 1, 10, 15): [log0],
        SnapshotSplit("orders", 1, 1, snapshot_id=2, log_offset=3): [snap1],
        LogSplit("orders", 2, 1, 0, 3): [log2],
    }
    return files


def lake_state(lake: Lake, table: str = "orders"):
    return lake.load(table).info


def test_bootstrap_applies_log_changes_row_by_row(writer, lake, round1):
    result = commit(writer, round1)

    assert not result.skipped
    assert result.delta_version == 0
    assert result.positions == {0: 15, 1: 3, 2: 3}
    assert result.bootstrap_buckets == (0, 1) and result.log_buckets == (0, 2)
    assert result.rows_in == 8  # 5 changes in [10, 15) of bucket 0 + 3 of bucket 2
    assert result.rows_out == 5
    assert orders_rows(lake) == {
        1: (0, "a", Decimal("1.00"), 2, ts(2)),
        2: (0, "b2", Decimal("2.50"), 10, ts(10)),
        4: (0, "d2", Decimal("1.00"), 13, ts(13)),
        10: (1, "x", Decimal("1.00"), 1, ts(1)),
        21: (2, "q", Decimal("1.00"), 1, ts(1)),
    }
    info = lake_state(lake)
    assert info.position == LakePosition(1, {0: 15, 1: 3, 2: 3})
    assert (info.epoch, info.round_id, info.lease_id, info.job, info.delta_version) == (1, 1, "lease-1", JOB, 0)
    assert info.snapshots == {0: 4, 1: 2}
    dt = delta(lake, "orders")
    assert dt.transaction_version(app_id(JOB, "orders")) == txn_version(1, 1)
    assert dt.metadata().partition_columns == ["__bucket"]


def test_second_round_merges_and_leaves_other_buckets_untouched(writer, lake, round1, tmp_path, spark):
    commit(writer, round1)
    untouched = {b: bucket_files(lake, b) for b in (1, 2)}
    log = write_log(
        tmp_path / "store2",
        ORDERS,
        [
            (14, "-D", {"id": 5}),  # already applied in round 1: trimmed, not re-applied
            (15, "+U", row(1, "a2")),
            (16, "-D", {"id": 2}),
            (17, "+I", row(6, "f")),
            (18, "+U", row(6, "f2")),
        ],
    )
    result = commit(writer, {LogSplit("orders", 0, 1, 15, 19): [log]}, round_id=2)

    assert not result.skipped and result.delta_version == 1
    assert result.positions == {0: 19, 1: 3, 2: 3}
    assert result.bootstrap_buckets == () and result.log_buckets == (0,)
    assert orders_rows(lake) == {
        1: (0, "a2", Decimal("1.00"), 15, ts(15)),
        4: (0, "d2", Decimal("1.00"), 13, ts(13)),
        6: (0, "f2", Decimal("1.00"), 18, ts(18)),
        10: (1, "x", Decimal("1.00"), 1, ts(1)),
        21: (2, "q", Decimal("1.00"), 1, ts(1)),
    }
    assert {b: bucket_files(lake, b) for b in (1, 2)} == untouched
    # Spark reads S3 only with the Hadoop S3A jars; the files of a MERGE with deletion vectors
    # hold rows their vectors delete (test_delta_spark_merge.py checks those through Delta)
    if not lake.store.is_s3 and not has_deletion_vectors(delta(lake)):
        spark_ids = {r.id for r in spark.read.parquet(*delta(lake, "orders").file_uris()).collect()}
        assert spark_ids == set(orders_rows(lake)), "Spark reading the committed files sees the same rows"


@pytest.mark.parametrize("limit, written_by", [(4, "driver"), (3, "executors")])
def test_delta_rs_writes_changelog_rounds_up_to_driver_max_changes_in_the_driver(
    spark, lake, round1, tmp_path, limit, written_by
):
    writer = DeltaRsRoundWriter(spark, lake, JOB, driver_max_changes=limit)
    assert commit(writer, round1).written_by == "executors"  # bootstrap buckets: always the executors
    log = write_log(
        tmp_path / "s",
        ORDERS,
        [(15, "+U", row(1, "a2")), (16, "-D", {"id": 2}), (17, "+I", row(6, "f")), (18, "+U", row(6, "f2"))],
    )
    jobs = len(spark.sparkContext.statusTracker().getJobIdsForGroup())

    result = commit(writer, {LogSplit("orders", 0, 1, 15, 19): [log]}, round_id=2)

    assert result.written_by == written_by
    assert len(spark.sparkContext.statusTracker().getJobIdsForGroup()) == jobs + (written_by == "executors")
    assert result.rows_in == 4 and result.rows_out == 3  # bucket 0 ends with ids 1, 4, 6
    assert {i: r[1] for i, r in orders_rows(lake).items() if r[0] == 0} == {1: "a2", 4: "d2", 6: "f2"}


def test_a_driver_round_big_enough_for_bucket_threads_writes_the_same_rows(spark, lake, round1, tmp_path, monkeypatch):
    monkeypatch.setattr(delta_rs_writer, "heavy", lambda plans: True)  # every round counts as big
    writer = DeltaRsRoundWriter(spark, lake, JOB)
    commit(writer, round1)
    log0 = write_log(
        tmp_path / "s0", ORDERS, [(15, "+U", row(1, "a2")), (16, "-D", {"id": 2}), (17, "+I", row(6, "f"))]
    )
    log2 = write_log(tmp_path / "s2", ORDERS, [(3, "+U", row(21, "q2")), (4, "+I", row(22, "r"))])

    result = commit(
        writer, {LogSplit("orders", 0, 1, 15, 18): [log0], LogSplit("orders", 2, 1, 3, 5): [log2]}, round_id=2
    )

    assert result.written_by == "driver" and result.log_buckets == (0, 2)
    assert {i: (r[0], r[1]) for i, r in orders_rows(lake).items()} == {
        1: (0, "a2"),
        4: (0, "d2"),
        6: (0, "f"),
        10: (1, "x"),
        21: (2, "q2"),
        22: (2, "r"),
    }


def events(payload: str = "Payload Text") -> StoreTable:
    """A table keyed by two mixed-case columns; its third column named ``payload``."""
    return store_table(
        TableInfo(
            name="events",
            table_id=7,
            schema=[
                {"name": "Region", "type": "string"},
                {"name": "Id", "type": "bigint"},
                {"name": payload, "type": "string"},
            ],
            primary_key=["Region", "Id"],
            num_buckets=2,
        )
    )


def test_a_composite_mixed_case_key_merges_by_every_key_column(writer, kind, lake, tmp_path):
    # delta-spark refuses a space in a column name (the test below): a dash it writes
    payload = "Payload-Text" if kind == "delta-spark" else "Payload Text"
    table = events(payload)

    def event(region: str, i: int, text: str | None = None) -> dict:
        return {"Region": region, "Id": i, payload: text}

    snap = write_snapshot(tmp_path / "s", table, [(event("eu", 1, "a"), 0), (event("us", 1, "b"), 1)])
    commit(writer, {SnapshotSplit("events", 0, 7, snapshot_id=1, log_offset=2): [snap]}, table=table)
    log = write_log(
        tmp_path / "l",
        table,
        [
            (2, "+U", event("eu", 1, "a2")),
            (3, "+I", event("eu", 2, "c")),
            (4, "-D", event("us", 1)),
            (5, "+I", event("us", 1, "b2")),  # re-inserted after its delete: the newest change wins
        ],
    )

    commit(writer, {LogSplit("events", 0, 7, 2, 6): [log]}, table=table, round_id=2)

    rows = lake.load("events").to_arrow().to_pylist()
    assert sorted((r["Region"], r["Id"], r[payload], r["__offset"]) for r in rows) == [
        ("eu", 1, "a2", 2),
        ("eu", 2, "c", 3),
        ("us", 1, "b2", 5),
    ]


@pytest.mark.delta_jars
def test_delta_spark_refuses_a_column_name_delta_cannot_write_before_anything_is_written(spark, tmp_path):
    skip_without_delta_jars(spark)
    lake = Lake.at(str(tmp_path / "lake"))
    table = events()
    snap = write_snapshot(tmp_path / "s", table, [({"Region": "eu", "Id": 1, "Payload Text": "a"}, 0)])

    with pytest.raises(SchemaMismatchError) as err:
        commit(build("delta-spark", spark, lake), {SnapshotSplit("events", 0, 7, 1, 1): [snap]}, table=table)

    assert err.value.table == "events"
    assert str(err.value).startswith("table 'events': delta-spark cannot write column(s) ['Payload Text']")
    assert 'lake.writer = "delta-rs"' in str(err.value)
    store = lake.store
    assert store.filesystem.get_file_info(store.path(lake.path("events"))).type == pafs.FileType.NotFound


def test_replayed_and_stale_rounds_are_skipped(writer, lake, round1, tmp_path):
    commit(writer, round1, epoch=2, round_id=5)
    before = orders_rows(lake)

    replay = commit(writer, round1, epoch=2, round_id=5)
    stale = commit(writer, round1, epoch=1, round_id=9)

    for result in (replay, stale):
        assert result.skipped and result.delta_version == 0
        assert result.positions == {0: 15, 1: 3, 2: 3}
    dt = delta(lake, "orders")
    assert dt.version() == 0 and orders_rows(lake) == before
    # a newer term's round 0 outranks round 5 of the older term
    log = write_log(tmp_path / "s", ORDERS, [(3, "+U", row(10, "x2"))])
    newer = commit(writer, {LogSplit("orders", 1, 1, 3, 4): [log]}, epoch=3, round_id=0)
    assert not newer.skipped and newer.delta_version == 1 and orders_rows(lake)[10][1] == "x2"


def test_a_round_of_a_term_older_than_the_tables_maintenance_fence_is_refused(writer, lake, round1, tmp_path):
    commit(writer, round1, epoch=2, round_id=5)
    # `tiering maintain` ran at epoch 4 and fenced the table before compacting it
    delta(lake).alter.set_table_properties({fence_property(JOB): "4"}, raise_if_not_exists=False)
    before, version = orders_rows(lake), delta(lake).version()
    log = write_log(tmp_path / "s", ORDERS, [(3, "+U", row(10, "x2"))])

    with pytest.raises(FencedEpochError, match=f"{JOB} fenced the table at epoch 4; round 6 of epoch 3"):
        commit(writer, {LogSplit("orders", 1, 1, 3, 4): [log]}, epoch=3, round_id=6)

    assert (orders_rows(lake), delta(lake).version()) == (before, version)
    assert not commit(writer, {LogSplit("orders", 1, 1, 3, 4): [log]}, epoch=4, round_id=0).skipped


def test_another_writers_fence_is_in_its_own_epochs_and_refuses_no_round_of_this_one(writer, lake, round1, tmp_path):
    commit(writer, round1, epoch=2, round_id=5)
    # the table's group (or another job) fenced it at its epoch 12: a number in its epochs, not ours
    fence_table(delta(lake), "orders", writer="group:g", epoch=12)
    log = write_log(tmp_path / "s", ORDERS, [(3, "+U", row(10, "x2"))])

    landed = commit(writer, {LogSplit("orders", 1, 1, 3, 4): [log]}, epoch=3, round_id=6)

    assert not landed.skipped and orders_rows(lake)[10][1] == "x2"
    assert lake.load("orders").transaction_version(app_id(JOB, "orders")) == txn_version(3, 6)


def test_a_round_whose_term_ends_before_its_commit_leaves_the_lake_as_it_was(writer, lake, round1):
    """``before_commit`` (a one-off term's check that it still leads: ``tiering resync``) runs once,
    after the files are written and before the commit; when it raises, nothing is committed."""
    calls: list[int] = []

    def term_over() -> None:
        calls.append(1)
        raise NotLeaderError("epoch 1 is over")

    with pytest.raises(NotLeaderError, match="epoch 1 is over"):
        writer.write_table_round(
            ORDERS,
            sorted(round1, key=sort_key),
            round1,
            None,
            epoch=1,
            round_id=1,
            lease_id="l",
            before_commit=term_over,
        )

    assert calls == [1] and lake.load("orders") is None
    landed = writer.write_table_round(
        ORDERS, sorted(round1, key=sort_key), round1, None, epoch=1, round_id=1, lease_id="l", before_commit=calls.clear
    )
    assert not landed.skipped and calls == [] and orders_rows(lake)[10][1] == "x"


def test_replace_table_replaces_every_bucket_and_the_schema(writer, lake, round1, tmp_path):
    commit(writer, round1)
    recreated = dataclasses.replace(ORDERS, table_id=7, columns=ORDERS.columns[:2])
    snap = write_snapshot(tmp_path / "s2", recreated, [({"id": 50, "name": "new"}, 0)])
    files = {SnapshotSplit("orders", 3, 7, snapshot_id=1, log_offset=1): [snap]}

    result = commit(writer, files, round_id=2, table=recreated, replace_table=True)

    assert result.positions == {3: 1} and result.table_id == 7
    data = lake.load("orders").to_arrow()
    assert data.column_names == ["id", "name", "__bucket", "__offset", "__timestamp"]
    assert data.to_pylist() == [{"id": 50, "name": "new", "__bucket": 3, "__offset": 0, "__timestamp": ts(0)}]
    assert lake_state(lake).position == LakePosition(7, {3: 1})


REGION = Column(name="region", type="string")
SCORE = Column(name="score", type="int")


def grown(table: StoreTable, *columns: Column) -> StoreTable:
    """``table`` after ``columns`` were appended upstream (``POST /v1/tables/{t}/columns``)."""
    return dataclasses.replace(table, columns=(*table.columns, *store_columns(columns)))


def store_columns(columns: Iterable[Column]) -> tuple[StoreColumn, ...]:
    """Columns a table's description names, as the seam has them (nullable: none is a key)."""
    return tuple(StoreColumn(c.name, c.type, arrow_type(c.type)) for c in columns)


def column(lake: Lake, name: str, table: str = "orders") -> dict[int, object]:
    """id -> the column's value in the lake, read with delta-rs."""
    return {r["id"]: r[name] for r in lake.load(table).to_arrow().to_pylist()}


def assert_one_commit_evolves(lake: Lake, version: int, round_id: int, added: str, delta_type: str) -> None:
    """Log entry ``version`` is the round's one commit: the new schema, its files and its txn."""
    entry = log_entry(lake, version)
    assert {"commitInfo", "metaData", "add", "remove", "txn"} <= entry.keys(), sorted(entry)
    (meta,) = entry["metaData"]
    new_field = {"name": added, "type": delta_type, "nullable": True, "metadata": {}}
    assert new_field in json.loads(meta["schemaString"])["fields"]
    (txn,) = entry["txn"]
    assert (txn["appId"], txn["version"]) == (app_id(JOB, "orders"), txn_version(1, round_id))


def test_columns_added_upstream_evolve_the_schema_in_the_rounds_one_commit(writer, kind, lake, round1, tmp_path):
    commit(writer, round1)
    with_region = grown(ORDERS, REGION)
    log = write_log(
        tmp_path / "s", with_region, [(15, "+U", {**row(1, "a2"), "region": "eu"}), (16, "+I", row(7, "g"))]
    )

    result = commit(writer, {LogSplit("orders", 0, 1, 15, 17): [log]}, round_id=2, table=with_region)

    assert not result.skipped and result.delta_version == 1 and result.added_columns == ("region",)
    assert result.written_by == WRITTEN_BY[kind]
    assert_one_commit_evolves(lake, 1, 2, "region", "string")
    assert column(lake, "region") == {1: "eu", 2: None, 4: None, 7: None, 10: None, 21: None}
    replay = commit(writer, {LogSplit("orders", 0, 1, 15, 17): [log]}, round_id=2, table=with_region)
    assert replay.skipped and delta(lake).version() == 1

    with_score = grown(with_region, SCORE)
    log = write_log(tmp_path / "s", with_score, [(3, "+U", {**row(10, "x2"), "score": 5})])
    result = commit(writer, {LogSplit("orders", 1, 1, 3, 4): [log]}, round_id=3, table=with_score)

    assert result.delta_version == 2 and result.added_columns == ("score",)
    assert_one_commit_evolves(lake, 2, 3, "score", "integer")
    assert column(lake, "score") == {1: None, 2: None, 4: None, 7: None, 10: 5, 21: None}
    assert column(lake, "region") == {1: "eu", 2: None, 4: None, 7: None, 10: None, 21: None}
    assert lake_state(lake).position == LakePosition(1, {0: 17, 1: 4, 2: 3})


def test_a_snapshot_older_than_the_column_bootstraps_with_nulls(writer, lake, tmp_path):
    with_region = grown(ORDERS, REGION)
    snap0 = write_snapshot(tmp_path / "s", ORDERS, [(row(1, "a"), 0), (row(2, "b"), 1)])
    snap1 = write_snapshot(tmp_path / "s", ORDERS, [(row(3, "c"), 0)])
    log0 = write_log(tmp_path / "s", with_region, [(2, "+U", {**row(2, "b2"), "region": "eu"}), (3, "+I", row(5, "e"))])
    files = {
        SnapshotSplit("orders", 0, 1, snapshot_id=1, log_offset=2): [snap0],
        LogSplit("orders", 0, 1, 2, 4): [log0],
        SnapshotSplit("orders", 1, 1, snapshot_id=1, log_offset=1): [snap1],
    }

    result = commit(writer, files, table=with_region)

    assert result.delta_version == 0 and result.added_columns == ()
    assert "region" in delta(lake).schema().to_arrow().names
    assert column(lake, "region") == {1: None, 2: "eu", 3: None, 5: None}
    assert column(lake, "name") == {1: "a", 2: "b2", 3: "c", 5: "e"}


@pytest.mark.parametrize(
    "columns, message",
    [
        (
            [{"name": "id", "type": "bigint"}, {"name": "name", "type": "string"}, {"name": "price", "type": "double"}],
            "column 'price' is double in the KV table but decimal(10,2) in Delta; expected decimal(10,2)",
        ),
        (
            [{"name": "id", "type": "bigint"}, {"name": "name", "type": "string"}],
            "column 'price' is in Delta but not in the KV table; expected every Delta column to stay",
        ),
    ],
    ids=["other-type", "dropped-column"],
)
def test_a_schema_change_the_lake_cannot_follow_commits_nothing(writer, lake, round1, tmp_path, columns, message):
    commit(writer, round1)
    files_before = data_files(lake)
    changed = dataclasses.replace(ORDERS, columns=store_columns(Column(**c) for c in columns))
    log = write_log(tmp_path / "s", changed, [(3, "+I", {"id": 11, "name": "y"})])

    with pytest.raises(LakeCommitError) as err:
        commit(writer, {LogSplit("orders", 1, 1, 3, 4): [log]}, round_id=2, table=changed)

    assert err.value.table == "orders"
    assert str(err.value).startswith("table 'orders': the Delta table at ") and message in str(err.value)
    assert delta(lake, "orders").version() == 0 and data_files(lake) == files_before


def test_other_table_id_without_replace_is_refused(writer, lake, round1, tmp_path):
    commit(writer, round1)
    recreated = dataclasses.replace(ORDERS, table_id=2)
    snap = write_snapshot(tmp_path / "s", recreated, [(row(1, "z"), 0)])

    with pytest.raises(LakeCommitError, match="table_id 1.*replace_table"):
        commit(writer, {SnapshotSplit("orders", 0, 2, 1, 1): [snap]}, round_id=2, table=recreated)
    assert delta(lake, "orders").version() == 0


def test_a_gap_before_the_log_split_is_refused(writer, lake, round1, tmp_path):
    commit(writer, round1)
    log = write_log(tmp_path / "s", ORDERS, [(20, "+I", row(7, "g"))])

    with pytest.raises(LakeCommitError, match="bucket 0: log split starts at offset 20 .* up to 15"):
        commit(writer, {LogSplit("orders", 0, 1, 20, 21): [log]}, round_id=2)
    assert delta(lake, "orders").version() == 0


def test_a_stale_term_racing_a_newer_one_is_fenced(spark, lake, writer, kind, round1, tmp_path):
    """Another term commits after this writer planned its round (and its files were written),
    right before its commit."""
    commit(writer, round1)
    newer_log = write_log(tmp_path / "n", ORDERS, [(15, "+U", row(1, "newer"))])
    stale_log = write_log(tmp_path / "o", ORDERS, [(15, "+U", row(1, "stale"))])
    newer = {LogSplit("orders", 0, 1, 15, 16): [newer_log]}

    def racing_commit(self, prepared, written):
        commit(writer, newer, epoch=2, round_id=1)
        return type(writer)._commit(self, prepared, written)

    raced = build(kind, spark, lake, _commit=racing_commit)

    with pytest.raises(FencedEpochError, match="newer term") as err:
        commit(raced, {LogSplit("orders", 0, 1, 15, 16): [stale_log]}, epoch=1, round_id=2)

    assert isinstance(err.value, NotLeaderError)
    dt = delta(lake, "orders")
    assert dt.version() == 1 and orders_rows(lake)[1][1] == "newer"
    if kind == "delta-spark":
        return  # delta-spark does not say which files a lost write left (a full VACUUM removes them)
    # delta-rs refuses it as ConcurrentDeleteRead (a rewrite removes files) before its app-id check
    assert "concurrent transaction" in str(err.value.__cause__).lower()
    if kind == "delta-rs-feed":
        return  # nor does delta-rs's MERGE
    table = lake.path("orders") + "/"
    on_disk = {u.removeprefix(table) for u in data_files(lake)}
    version0 = DeltaTable(dt.table_uri, version=0, storage_options=lake.store.delta_options())
    referenced = {u.removeprefix(table) for u in set(dt.file_uris()) | set(version0.file_uris())}
    assert on_disk == referenced, "the stale writer's files were left behind"


@pytest.mark.parametrize("kind", ["delta-rs-executors", "delta-rs-driver"])
def test_a_round_replaces_only_the_files_whose_key_range_holds_a_change(spark, lake, round1, tmp_path, kind):
    writer = build(kind, spark, lake)
    writer._target_file_bytes = 1  # a file per row: each key its own range
    commit(writer, round1)
    before = bucket_files(lake, 0)
    assert len(before) == 3, "bucket 0 (ids 1, 2, 4) as three sorted one-row files"
    log = write_log(tmp_path / "s", ORDERS, [(15, "+U", row(4, "d3")), (16, "+I", row(5, "e")), (17, "-D", {"id": 7})])

    result = commit(writer, {LogSplit("orders", 0, 1, 15, 18): [log]}, round_id=2)

    entry = log_entry(lake, result.delta_version)
    (removed,) = entry["remove"]
    assert removed["dataChange"] and before - bucket_files(lake, 0) == {
        u for u in before if u.endswith(removed["path"])
    }
    assert sorted(json.loads(a["stats"])["minValues"]["id"] for a in entry["add"]) == [4, 5], "5 joins 4's rewrite"
    assert {i: r[1] for i, r in orders_rows(lake).items() if r[0] == 0} == {1: "a", 2: "b2", 4: "d3", 5: "e"}
    assert commit(writer, {LogSplit("orders", 0, 1, 15, 18): [log]}, round_id=2).skipped


@pytest.mark.delta_jars
@pytest.mark.parametrize(
    "kinds",
    [
        ("delta-rs-executors", "delta-spark-replace", "delta-rs-driver"),
        ("delta-spark-replace", "delta-rs-driver", "delta-spark-replace"),
    ],
    ids=["from-delta-rs", "from-delta-spark"],
)
def test_a_table_whose_writer_is_switched_reads_the_same_through_delta_rs_and_spark(spark, round1, tmp_path, kinds):
    """One writer's table taken over by the other and back: each round lands on the other's files
    (delta-rs rewrites by file from delta-spark's stats), and both readers read every version alike.
    delta-spark rewrites buckets here: a table with deletion vectors stays with delta-spark
    (test_delta_spark_merge.py)."""
    skip_without_delta_jars(spark)
    lake = Lake.at(str(tmp_path / "lake"))
    first, second, third = (build(kind, spark, lake) for kind in kinds)
    commit(first, round1)
    log = write_log(tmp_path / "s", ORDERS, [(15, "+U", row(1, "a2")), (16, "-D", {"id": 2}), (17, "+I", row(5, "e"))])
    commit(second, {LogSplit("orders", 0, 1, 15, 18): [log]}, round_id=2)
    log = write_log(tmp_path / "t", ORDERS, [(18, "+U", row(5, "e2", "5.00")), (3, "+I", row(11, "y"))])
    result = commit(third, {LogSplit("orders", 0, 1, 18, 19): [log], LogSplit("orders", 1, 1, 3, 4): [log]}, round_id=3)

    assert result.delta_version == 2 and result.positions == {0: 19, 1: 4, 2: 3}
    expected = {
        1: (0, "a2", Decimal("1.00"), 15, ts(15)),
        4: (0, "d2", Decimal("1.00"), 13, ts(13)),
        5: (0, "e2", Decimal("5.00"), 18, ts(18)),
        10: (1, "x", Decimal("1.00"), 1, ts(1)),
        11: (1, "y", Decimal("1.00"), 3, ts(3)),
        21: (2, "q", Decimal("1.00"), 1, ts(1)),
    }
    assert orders_rows(lake) == expected
    reader = DeltaReader(spark)
    columns = ("__bucket", "name", "price", "__offset", "__timestamp")
    assert {i: tuple(r[c] for c in columns) for i, r in reader.rows(lake, "orders").items()} == expected
    assert_versions_read_alike(reader, lake, "orders")
    assert lake_state(lake).position == LakePosition(1, {0: 19, 1: 4, 2: 3})
