"""DeltaSparkRoundWriter: the delta-rs writer's scenarios, run with delta-spark.

They need the Delta jars on Spark's classpath and are skipped without them (the test session
has none: Maven Central is out of reach, so ``--packages`` cannot fetch them). What runs
everywhere: the clear error when the jars are missing, and reading positions back from a
commit shaped like delta-spark's (``userMetadata`` JSON), written here with delta-rs.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import CommitProperties

from tests.integration.lake.store_files import ts, write_log, write_snapshot
from tests.integration.lake.test_round_writer import JOB, ORDERS, commit, lake, lake_rows, round1, row  # noqa: F401
from tiering.enumerator.positions import LakePosition
from tiering.enumerator.splits import LogSplit, SnapshotSplit
from tiering.errors import ConfigError, FencedEpochError, LakeCommitError
from tiering.lake.delta_spark_writer import DeltaSparkRoundWriter, check_delta_jars
from tiering.lake.layout import app_id, table_path, txn_version
from tiering.lake.positions import commit_metadata, read_commit_info, read_position

pytestmark = pytest.mark.integration


def _missing_jars(spark) -> str | None:
    try:
        check_delta_jars(spark)
    except ConfigError as e:
        return e.problems[0]
    return None


@pytest.fixture
def writer(spark, lake):  # noqa: F811
    missing = _missing_jars(spark)
    if missing is not None:
        pytest.skip(f"delta-spark path not executable here, the Delta jars are not on the classpath: {missing}")
    return DeltaSparkRoundWriter(spark, str(lake), JOB)


def test_without_the_jars_the_writer_refuses_to_start(spark, lake):  # noqa: F811
    if _missing_jars(spark) is None:
        pytest.skip("the Delta jars are on the classpath")
    from tiering.lake.writers import WRITERS

    assert "delta-spark" in WRITERS
    with pytest.raises(ConfigError) as err:
        DeltaSparkRoundWriter(spark, str(lake), JOB)
    (problem,) = err.value.problems
    assert problem.startswith("lake.writer: 'delta-spark' needs the Delta Lake jars")
    assert "io.delta.tables.DeltaTable" in problem
    assert "io.delta:delta-spark_2.13:" in problem and f"Spark {spark.version}" in problem
    assert 'lake.writer = "delta-rs"' in problem
    assert not lake.exists()


def test_positions_are_read_back_from_delta_spark_user_metadata(tmp_path):
    """delta-spark can only set commitInfo.userMetadata (a string); delta-rs history() shows it
    as ``userMetadata``. Written here with delta-rs in exactly that shape."""
    path = table_path(str(tmp_path), "orders")
    position = LakePosition(1, {0: 15, 2: 3})
    metadata = commit_metadata(job=JOB, position=position, epoch=2, round_id=7, lease_id="lease-1", snapshots={0: 4})
    write_deltalake(
        path, pa.table({"id": [1]}),
        commit_properties=CommitProperties(custom_metadata={"userMetadata": json.dumps(metadata, sort_keys=True)}),
    )
    write_deltalake(  # another tool's free-text userMetadata on top is walked past
        path, pa.table({"id": [2]}), mode="append",
        commit_properties=CommitProperties(custom_metadata={"userMetadata": "manual fix-up"}),
    )

    assert read_position(str(tmp_path), "orders") == position
    info = read_commit_info(str(tmp_path), "orders")
    assert (info.epoch, info.round_id, info.lease_id, info.job, info.delta_version) == (2, 7, "lease-1", JOB, 0)
    assert info.snapshots == {0: 4}


def test_bootstrap_applies_log_changes_row_by_row(writer, lake, round1):  # noqa: F811
    result = commit(writer, round1)

    assert not result.skipped and result.delta_version == 0
    assert result.positions == {0: 15, 1: 3, 2: 3}
    assert result.bootstrap_buckets == (0, 1) and result.log_buckets == (0, 2)
    assert (result.rows_in, result.rows_out) == (8, 5)
    assert lake_rows(lake) == {
        1: (0, "a", Decimal("1.00"), 2, ts(2)),
        2: (0, "b2", Decimal("2.50"), 10, ts(10)),
        4: (0, "d2", Decimal("1.00"), 13, ts(13)),
        10: (1, "x", Decimal("1.00"), 1, ts(1)),
        21: (2, "q", Decimal("1.00"), 1, ts(1)),
    }
    assert read_position(str(lake), "orders") == LakePosition(1, {0: 15, 1: 3, 2: 3})
    info = read_commit_info(str(lake), "orders")
    assert (info.epoch, info.round_id, info.lease_id, info.snapshots) == (1, 1, "lease-1", {0: 4, 1: 2})
    dt = DeltaTable(table_path(str(lake), "orders"))
    assert dt.transaction_version(app_id(JOB, "orders")) == txn_version(1, 1)
    assert dt.metadata().partition_columns == ["__bucket"]


def test_second_round_merges_and_leaves_other_buckets_untouched(writer, lake, round1, tmp_path):  # noqa: F811
    commit(writer, round1)
    before = DeltaTable(table_path(str(lake), "orders")).file_uris()
    untouched = {u for u in before if "__bucket=0/" not in u}
    log = write_log(tmp_path / "store2", ORDERS, [
        (14, "-D", {"id": 5}),
        (15, "+U", row(1, "a2")),
        (16, "-D", {"id": 2}),
        (17, "+I", row(6, "f")),
        (18, "+U", row(6, "f2")),
    ])
    result = commit(writer, {LogSplit("orders", 0, 1, 15, 19): [log]}, round_id=2)

    assert not result.skipped and result.delta_version == 1
    assert result.positions == {0: 19, 1: 3, 2: 3} and result.log_buckets == (0,)
    assert lake_rows(lake) == {
        1: (0, "a2", Decimal("1.00"), 15, ts(15)),
        4: (0, "d2", Decimal("1.00"), 13, ts(13)),
        6: (0, "f2", Decimal("1.00"), 18, ts(18)),
        10: (1, "x", Decimal("1.00"), 1, ts(1)),
        21: (2, "q", Decimal("1.00"), 1, ts(1)),
    }
    after = DeltaTable(table_path(str(lake), "orders")).file_uris()
    assert {u for u in after if "__bucket=0/" not in u} == untouched


def test_replayed_and_stale_rounds_are_skipped(writer, lake, round1, tmp_path):  # noqa: F811
    commit(writer, round1, epoch=2, round_id=5)
    before = lake_rows(lake)

    for result in (commit(writer, round1, epoch=2, round_id=5), commit(writer, round1, epoch=1, round_id=9)):
        assert result.skipped and result.delta_version == 0 and result.positions == {0: 15, 1: 3, 2: 3}
    assert DeltaTable(table_path(str(lake), "orders")).version() == 0 and lake_rows(lake) == before
    log = write_log(tmp_path / "s", ORDERS, [(3, "+U", row(10, "x2"))])
    newer = commit(writer, {LogSplit("orders", 1, 1, 3, 4): [log]}, epoch=3, round_id=0)
    assert not newer.skipped and newer.delta_version == 1 and lake_rows(lake)[10][1] == "x2"


def test_replace_table_replaces_every_bucket_and_the_schema(writer, lake, round1, tmp_path):  # noqa: F811
    commit(writer, round1)
    recreated = ORDERS.model_copy(update={"table_id": 7, "columns": ORDERS.columns[:2]})
    snap = write_snapshot(tmp_path / "s2", recreated, [({"id": 50, "name": "new"}, 0)])

    result = commit(writer, {SnapshotSplit("orders", 3, 7, 1, 1): [snap]}, round_id=2, table=recreated, replace_table=True)

    assert result.positions == {3: 1} and result.table_id == 7
    data = DeltaTable(table_path(str(lake), "orders")).to_pyarrow_table()
    assert data.column_names == ["id", "name", "__bucket", "__offset", "__timestamp"]
    assert data.to_pylist() == [{"id": 50, "name": "new", "__bucket": 3, "__offset": 0, "__timestamp": ts(0)}]
    assert read_position(str(lake), "orders") == LakePosition(7, {3: 1})


def test_schema_mismatch_and_gaps_commit_nothing(writer, lake, round1, tmp_path):  # noqa: F811
    commit(writer, round1)
    changed = ORDERS.model_copy(update={"columns": ORDERS.columns[:2]})
    log = write_log(tmp_path / "s", changed, [(3, "+I", {"id": 11, "name": "y"})])
    with pytest.raises(LakeCommitError, match="'orders'.*price"):
        commit(writer, {LogSplit("orders", 1, 1, 3, 4): [log]}, round_id=2, table=changed)
    gap = write_log(tmp_path / "g", ORDERS, [(20, "+I", row(7, "g"))])
    with pytest.raises(LakeCommitError, match="bucket 0: log split starts at offset 20 .* up to 15"):
        commit(writer, {LogSplit("orders", 0, 1, 20, 21): [gap]}, round_id=3)
    assert DeltaTable(table_path(str(lake), "orders")).version() == 0


class _RacedWriter(DeltaSparkRoundWriter):
    """Lets another writer commit after this one planned, right before its delta-spark write."""

    def __init__(self, *args, race) -> None:
        super().__init__(*args)
        self._race = race

    def _save(self, writer, path) -> None:
        self._race()
        super()._save(writer, path)


def test_a_stale_term_racing_a_newer_one_is_fenced(spark, lake, writer, round1, tmp_path):  # noqa: F811
    commit(writer, round1)
    newer = {LogSplit("orders", 0, 1, 15, 16): [write_log(tmp_path / "n", ORDERS, [(15, "+U", row(1, "newer"))])]}
    stale = {LogSplit("orders", 0, 1, 15, 16): [write_log(tmp_path / "o", ORDERS, [(15, "+U", row(1, "stale"))])]}
    raced = _RacedWriter(spark, str(lake), JOB, race=lambda: commit(writer, newer, epoch=2, round_id=1))

    with pytest.raises(FencedEpochError, match="newer term"):
        commit(raced, stale, epoch=1, round_id=2)

    assert DeltaTable(table_path(str(lake), "orders")).version() == 1 and lake_rows(lake)[1][1] == "newer"
