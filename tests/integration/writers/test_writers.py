"""The writer factory builds what ``lake.writer`` names, or refuses before any round starts."""

from __future__ import annotations

import pyarrow.fs as pafs
import pytest

from tests.support.writers import JOB, ORDERS, missing_delta_jars
from tiering.conf.model import LakeConfig
from tiering.delta_log.lake import Lake
from tiering.enumerator.splits import SnapshotSplit
from tiering.errors import ConfigError
from tiering.kvstore.client import KvStoreClient
from tiering.kvstore.reference import ReferenceBucketReader
from tiering.writers.choice import WRITERS, make_round_writer
from tiering.writers.delta_rs_writer import DeltaRsRoundWriter
from tiering.writers.delta_spark_writer import DeltaSparkRoundWriter

pytestmark = pytest.mark.integration


def test_an_unknown_writer_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown writer 'hudi'") as err:
        make_round_writer(None, LakeConfig.model_construct(root="/tmp/lake", writer="hudi"), JOB)
    assert err.value.problems[0].startswith("lake.writer")


def test_the_factory_builds_the_delta_rs_writer(spark, tmp_path):
    config = LakeConfig(root=str(tmp_path / "lake"), driver_max_changes=7, merge_max_rows=9)
    writer = make_round_writer(spark, config, JOB)
    assert isinstance(writer, DeltaRsRoundWriter) and (writer._driver_max_changes, writer._merge_max_rows) == (7, 9)
    assert spark.conf.get("spark.sql.parquet.outputTimestampType") == "TIMESTAMP_MICROS"


def test_the_writer_writes_to_the_lake_it_is_given(spark, tmp_path):
    """The job gives its term's one lake (``TermContext.lake``); a config alone builds one."""
    config = LakeConfig(root=str(tmp_path / "lake"))
    term_lake = Lake.of(config)
    assert make_round_writer(spark, config, JOB, term_lake).lake is term_lake
    assert make_round_writer(spark, config, JOB).lake == term_lake


@pytest.mark.delta_jars
def test_with_the_jars_the_factory_builds_the_delta_spark_writer(spark, tmp_path):
    if missing_delta_jars(spark) is not None:
        pytest.skip("the Delta jars are not on the classpath (scripts/test_delta.sh puts them there)")
    config = LakeConfig(root=str(tmp_path / "lake"), writer="delta-spark", delta_spark_single_driver=True)
    writer = make_round_writer(spark, config, JOB)
    assert isinstance(writer, DeltaSparkRoundWriter) and writer.writer_id == JOB


@pytest.mark.delta_jars
def test_delta_spark_refuses_a_round_read_through_a_stores_reader_before_anything_is_written(spark, tmp_path):
    """Spark reads a round's store files; a store without them (Fluss) would leave its buckets empty."""
    if missing_delta_jars(spark) is not None:
        pytest.skip("the Delta jars are not on the classpath (scripts/test_delta.sh puts them there)")
    lake = tmp_path / "lake"
    writer = DeltaSparkRoundWriter(spark, Lake.at(str(lake)), JOB)
    split = SnapshotSplit("orders", 0, ORDERS.table_id, 5, 10)
    reader = ReferenceBucketReader(KvStoreClient("http://127.0.0.1:9"))  # connects only when it reads
    with pytest.raises(ConfigError) as err:
        writer.prepare(ORDERS, [split], {}, None, epoch=1, round_id=1, lease_id="lease-1", reader=reader)
    (problem,) = err.value.problems
    assert problem.startswith('lake.writer = "delta-spark"') and "table 'orders'" in problem
    assert problem.endswith('expected lake.writer = "delta-rs"') and not lake.exists()


def test_without_the_jars_delta_spark_refuses_to_start(spark, tmp_path):
    if missing_delta_jars(spark) is None:
        pytest.skip("the Delta jars are on the classpath")
    lake = tmp_path / "lake"
    assert "delta-spark" in WRITERS
    with pytest.raises(ConfigError) as err:
        DeltaSparkRoundWriter(spark, Lake.at(str(lake)), JOB)
    (problem,) = err.value.problems
    assert problem.startswith("lake.writer: 'delta-spark' needs the Delta Lake jars")
    assert "io.delta.tables.DeltaTable" in problem
    minor = ".".join(spark.version.split(".")[:2])
    assert f"io.delta:delta-spark_{minor}_2.13:" in problem and f"Spark {spark.version}" in problem
    assert 'lake.writer = "delta-rs"' in problem
    assert not lake.exists()


def test_delta_spark_refuses_an_s3_lake_before_anything_is_written(s3_server, s3_root):
    """Its S3 commits are a check then a write, not one conditional put: a zombie driver or the
    job's own delta-rs commits could overwrite one (docs/DESIGN.md §6)."""
    # a config built in code, past the loader's own refusal of the pair
    config = LakeConfig(root=s3_root, storage=s3_server.storage_options()).model_copy(update={"writer": "delta-spark"})

    with pytest.raises(ConfigError) as err:
        make_round_writer(None, config, JOB)

    (problem,) = err.value.problems
    assert problem.startswith(f"lake.writer = 'delta-spark' cannot commit to lake.root = '{s3_root}' on S3")
    assert "S3SingleDriverLogStore, spark.delta.logStore.s3.impl" in problem
    assert "io.delta.storage.S3DynamoDBLogStore" in problem
    assert problem.endswith('Use lake.writer = "delta-rs" on S3 (every commit an If-None-Match: * put)')
    store = Lake.of(config).store
    assert store.filesystem.get_file_info(pafs.FileSelector(store.path(store.root), allow_not_found=True)) == []
