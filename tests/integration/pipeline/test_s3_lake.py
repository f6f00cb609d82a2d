"""The whole pipeline into an S3 lake (a real S3 server on loopback), and the roots it refuses.

Executors write the data files straight into S3 and the driver commits; nothing is staged
locally. A bad root (no such bucket, nothing listening, wrong secret, a file where the root
should be) fails the run at start-up, naming the root and the reason, before the job leads or
writes anything to the checkpoint.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow.fs as pafs
import pytest

from tests.support.config import make_config, write_conf
from tests.support.oracle import TableOracle, assert_lake_equals
from tiering.cli import EXIT_FAILURE
from tiering.context import TermContext
from tiering.delta_log.lake import Lake
from tiering.job import TieringJob
from tiering.kvstore.reference import bucket_log
from tiering.ports import free_port

pytestmark = pytest.mark.integration


def s3_config(tmp_path, store_url: str, root: str, storage: dict, **overrides):
    return make_config(tmp_path, store_url, "127.0.0.1:1", **{"lake.root": root, "lake.storage": storage, **overrides})


@pytest.mark.delta_jars  # Spark's Delta reads the S3 lake too, through s3a
def test_three_tables_with_updates_and_deletes_land_in_s3_row_by_row(spark, kv_store, s3_server, s3_root, tmp_path):
    client = kv_store.client()
    tables = [TableOracle(client, name, num_buckets=3) for name in ("orders", "customers", "items")]
    for t in tables:
        t.upsert(range(300))
        client.take_snapshots(t.name)
        t.churn(100, key_space=400)
    config = s3_config(tmp_path, kv_store.url, s3_root, s3_server.storage_options(), **{"lake.driver_max_changes": 0})
    lake = Lake.of(config.lake)

    assert TieringJob(spark, TermContext.begin(config, 1)).run().ok
    for t in tables:
        assert_lake_equals(lake, t)
    for t in tables:
        t.churn(80, key_space=500)
    assert TieringJob(spark, TermContext.begin(config, 2)).run().ok  # rewrites touched buckets in S3

    for t in tables:
        assert_lake_equals(lake, t)
        info = lake.load(t.name).info
        assert (info.epoch, info.position.lag(map(bucket_log, client.log_info(t.name).buckets))) == (2, 0)
    local = os.listdir(tmp_path)
    assert "lake" not in local, "nothing of the lake is written locally"
    assert client.list_leases() == []


@pytest.fixture
def bad_roots(s3_server, s3_root):
    """name -> (root, storage options, reason the error must give)."""
    good = s3_server.storage_options()
    fs = Lake.at(s3_root, good).store.filesystem
    with fs.open_output_stream(f"{s3_root.removeprefix('s3://')}/a-file") as out:
        out.write(b"not a directory")
    return {
        "no such bucket": ("s3://no-such-bucket/lake", good, "bucket 'no-such-bucket' does not exist"),
        "unreachable": (s3_root, {**good, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}"}, "unreachable"),
        "wrong secret": (s3_root, {**good, "AWS_SECRET_ACCESS_KEY": "wrong"}, "access denied"),
        "a file": (f"{s3_root}/a-file", good, "is a file, not a directory"),
    }


@pytest.mark.parametrize("case", ["no such bucket", "unreachable", "wrong secret", "a file"])
def test_a_bad_s3_root_fails_at_start_naming_it_and_writes_nothing(kv_store, bad_roots, tmp_path, case):
    root, storage, reason = bad_roots[case]
    conf = write_conf(  # ZooKeeper is never reached: the root is checked first
        tmp_path / "tiering.toml",
        job="bad-root",
        store_url=kv_store.url,
        zk_hosts=f"127.0.0.1:{free_port()}",
        lake_root=root,
        lake={"storage": storage},
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIERING_", "AWS_"))}

    run = subprocess.run(
        [sys.executable, "-m", "tiering.cli", "run", "--conf", str(conf), "--available-now"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert run.returncode == EXIT_FAILURE, run.stderr[-2000:]
    assert "Traceback" not in run.stderr
    assert f"lake root {root!r}" in run.stderr and reason in run.stderr, run.stderr[-2000:]
    assert storage["AWS_SECRET_ACCESS_KEY"] not in run.stderr, "a secret was printed"
    assert not (tmp_path / "ckpt").exists()
    if case != "no such bucket":
        listed = Lake.at(root if case != "a file" else root.rsplit("/", 1)[0], bad_roots["a file"][1]).store
        names = [
            f.base_name
            for f in listed.filesystem.get_file_info(pafs.FileSelector(listed.path(listed.root), allow_not_found=True))
        ]
        assert not [n for n in names if n != "a-file"], f"something was written under the root: {names}"
