"""Maintenance end to end: real store process, ZooKeeper, local Spark rounds, real Delta tables."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from tests.support.config import make_config, write_conf
from tests.support.lake import delta_rows
from tests.support.oracle import TableOracle, assert_lake_equals
from tiering import cli
from tiering.context import TermContext
from tiering.coord.leader import acquire_leadership
from tiering.delta_log.lake import Lake
from tiering.job import TieringJob, maintain_as_leader

pytestmark = pytest.mark.integration


def _split_buckets(path: str, parts: int) -> None:
    """Rewrite every bucket's files as ``parts`` small files (rows unchanged), the way a writer
    that appends would leave a bucket. One log entry whose adds and removes say ``dataChange:
    false`` (a rearrangement, as an OPTIMIZE writes it), so the job does not take it for another
    writer's change of data; delta-rs's overwrite would mark its removes as data changes."""
    dt = DeltaTable(path)
    data = delta_rows(dt)
    now = int(time.time() * 1000)
    actions = [{"commitInfo": {"timestamp": now, "operation": "OPTIMIZE", "operationParameters": {}}}]
    actions += [
        {
            "remove": {
                "path": old,
                "deletionTimestamp": now,
                "dataChange": False,
                "extendedFileMetadata": True,
                "partitionValues": {"__bucket": str(bucket)},
                "size": size,
            }
        }
        for old, bucket, size in zip(
            *(
                pa.table(dt.get_add_actions(flatten=True)).column(c).to_pylist()
                for c in ("path", "partition.__bucket", "size_bytes")
            ),
            strict=False,
        )
    ]
    for bucket in sorted(set(data.column("__bucket").to_pylist())):
        rows = data.filter(pa.compute.equal(data["__bucket"], pa.scalar(bucket, pa.int32())))
        step = -(-rows.num_rows // parts)
        for i in range(parts):
            rel = f"__bucket={bucket}/part-{uuid.uuid4().hex}.parquet"
            pq.write_table(rows.slice(i * step, step).drop(["__bucket"]), f"{path}/{rel}")
            actions.append(
                {
                    "add": {
                        "path": rel,
                        "partitionValues": {"__bucket": str(bucket)},
                        "size": os.path.getsize(f"{path}/{rel}"),
                        "modificationTime": now,
                        "dataChange": False,
                    }
                }
            )
    entry = Path(path) / "_delta_log" / f"{dt.version() + 1:020d}.json"
    entry.write_text("".join(json.dumps(action) + "\n" for action in actions))


def _files_per_bucket(path: str) -> dict[int, int]:
    buckets = [
        int(b)
        for b in pa.table(DeltaTable(path).get_add_actions(flatten=True)).column("partition.__bucket").to_pylist()
    ]
    return {b: buckets.count(b) for b in sorted(set(buckets))}


def test_every_tiering_maintain_compacts_every_table_keeping_rows_and_offsets_and_the_next_round_commits(
    spark, kv_store, zk_hosts, unique_job, tmp_path
):
    client = kv_store.client()
    oracles = {name: TableOracle(client, name, num_buckets=2) for name in ("orders", "users")}
    for name, oracle in oracles.items():
        oracle.upsert(range(300))
        client.take_snapshots(name)
    orders = oracles["orders"]
    config = make_config(
        tmp_path,
        kv_store.url,
        zk_hosts,
        job=unique_job,
        **{
            "maintenance.every_rounds": 1,
            "maintenance.checkpoint_interval": 1,
            "maintenance.min_files": 4,
            "maintenance.target_file_mb": 1,
            "maintenance.file_retention_hours": 24,
        },
    )
    assert TieringJob(spark, TermContext.begin(config, 1)).run().ok
    paths = {name: str(tmp_path / "lake" / name) for name in oracles}
    path = paths["orders"]
    table = DeltaTable(path)
    assert table.metadata().configuration["delta.checkpointInterval"] == "1", "the leader's own pass ran"
    assert (Path(path) / "_delta_log" / f"{table.version() - 1:020d}.checkpoint.parquet").exists()

    before = Lake.at(str(tmp_path / "lake")).load("orders")
    # each `tiering maintain` is a term of its own, whose maintainer knows no earlier pass: it
    # covers every table, though nothing tiered them since the last one
    for _ in range(2):
        for each in paths.values():
            _split_buckets(each, parts=6)
        assert _files_per_bucket(path) == {0: 6, 1: 6}

        result = maintain_as_leader(config)

        assert result.ok and list(result.done) == ["orders", "users"]
        assert [done.compacted for done in result.done.values()] == [(0, 1), (0, 1)]
        assert [_files_per_bucket(each) for each in paths.values()] == [{0: 1, 1: 1}] * 2
        for oracle in oracles.values():
            assert_lake_equals(tmp_path / "lake", oracle)
    after = Lake.at(str(tmp_path / "lake")).load("orders")
    assert after.position() == before.position(), "the offsets survive the compaction"

    orders.churn(40, key_space=400)
    outcome = TieringJob(spark, TermContext.begin(config, result.epoch + 1)).run()
    assert outcome.ok and outcome.rounds >= 1
    assert_lake_equals(tmp_path / "lake", orders)
    assert Lake.at(str(tmp_path / "lake")).load("orders").info.epoch == result.epoch + 1


def test_maintain_is_refused_while_a_leader_holds_the_election(zk_hosts, unique_job, tmp_path, capsys):
    conf = write_conf(tmp_path / "t.toml", job=unique_job, store_url="http://127.0.0.1:1", zk_hosts=zk_hosts)
    with acquire_leadership(zk_hosts, unique_job, 5.0, timeout_s=10):
        code = cli.main(["maintain", "--conf", str(conf)])
    assert code == cli.EXIT_FAILURE
    err = capsys.readouterr().err
    assert f"job {unique_job!r} is led by" in err and "stop it to run `tiering maintain` by hand" in err
    assert not (tmp_path / "lake" / "orders").exists()
