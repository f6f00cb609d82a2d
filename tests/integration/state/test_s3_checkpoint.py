"""The job's own checkpoint files on S3 (a real S3 server on loopback): the same guarantees as on
a local disk. The lease id is created once, by a conditional put, so racing drivers all get the
one that landed; a driver elsewhere (another process, no local state) reads it back; the health
file and the offsets log read as locally; the checks name a file where a folder belongs, a
prefix that refuses writes and a missing bucket, and leave a good checkpoint as they found it.
A session without Spark's s3a jars is refused before the query starts, naming them.
"""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys

import pyarrow.fs as pafs
import pytest

from tests.support.fault_proxy import FaultProxy, Respond, Rule
from tiering.enumerator.splits import LogSplit
from tiering.errors import CheckpointError, ConfigError
from tiering.job import use_checkpoint_store
from tiering.round.health import TableHealth, read_health, write_health
from tiering.state.checkpoint_check import check_checkpoint
from tiering.state.checkpoint_store import open_checkpoint
from tiering.state.lease_file import load_or_create_lease_id, read_lease_id
from tiering.state.offset import TieringOffset
from tiering.state.offset_log import read_batch_offset, replayed_offset

pytestmark = pytest.mark.integration

OFFSET = TieringOffset("job-1", 1, 1, (LogSplit("a", 0, 1, 0, 7),))
ACCESS_DENIED = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>'
)


@pytest.fixture
def checkpoint(s3_root) -> str:
    return f"{s3_root}/ckpt"


def put(store, part: str, data: str) -> None:
    store.replace(part, data.encode())


def objects(store) -> dict[str, bytes]:
    fs = store.store.filesystem
    root = store.store.path(store.location)
    infos = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    return {i.path[len(root) + 1 :]: fs.open_input_stream(i.path).read() for i in infos if i.type == pafs.FileType.File}


def write_checkpoint(store) -> None:
    """Spark's logs and the job's files as a run leaves them (s3a writes no checksum files)."""
    for batch_id in range(3):
        put(
            store,
            f"offsets/{batch_id}",
            'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n' + OFFSET.to_json(),
        )
    for batch_id in range(2):
        put(store, f"commits/{batch_id}", 'v1\n{"nextBatchWatermarkMs":0}')
    put(store, "metadata", '{"id":"e5c33362-6726-4189-a1d1-b3a93b1dc750"}')
    put(store, "sources/0/0", "v1\n0")
    put(store, "tiering/lease.json", '{"lease_id": "job-1", "job": "job"}')
    put(store, "tiering/tables.json", "{}")


def _create(args: tuple[str, dict, str]) -> str:
    checkpoint, storage, job = args
    return load_or_create_lease_id(open_checkpoint(checkpoint, storage), job)


def test_the_lease_id_is_created_once_by_racing_drivers_and_read_back_elsewhere(s3_server, checkpoint):
    storage = s3_server.storage_options()
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        ids = pool.map(_create, [(checkpoint, storage, "job0")] * 8)
    store = open_checkpoint(checkpoint, storage)
    stored = json.loads(objects(store)["tiering/lease.json"])["lease_id"]
    assert set(ids) == {stored}, "every racer got the one id that landed"
    assert list(objects(store)) == ["tiering/lease.json"], "nothing else written"
    assert load_or_create_lease_id(store, "job0") == stored
    # a driver restarted on another node: a fresh process with nothing but the config
    code = (
        "import sys, json; from tiering.state.checkpoint_store import open_checkpoint; "
        "from tiering.state.lease_file import read_lease_id; "
        "print(read_lease_id(open_checkpoint(sys.argv[1], json.loads(sys.argv[2]))))"
    )
    elsewhere = subprocess.run(
        [sys.executable, "-c", code, checkpoint, json.dumps(storage)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert elsewhere.stdout.strip() == stored


def test_a_lease_file_that_does_not_parse_is_named_and_kept(s3_server, checkpoint):
    store = open_checkpoint(checkpoint, s3_server.storage_options())
    put(store, "tiering/lease.json", "{not json")
    with pytest.raises(CheckpointError, match=f"lease file {checkpoint}/tiering/lease.json is unreadable"):
        load_or_create_lease_id(store, "j")
    assert objects(store) == {"tiering/lease.json": b"{not json"}


def test_health_file_and_offsets_log_read_back(s3_server, checkpoint):
    store = open_checkpoint(checkpoint, s3_server.storage_options())
    assert read_health(store) == {} and read_lease_id(store) is None and replayed_offset(store) is None
    health = {"orders": TableHealth(table="orders", table_id=3, last_commit_version=7)}
    write_health(store, health)
    assert read_health(store) == health
    write_checkpoint(store)
    assert read_batch_offset(store, 2) == OFFSET
    assert replayed_offset(store) == OFFSET, "batch 2 planned, not committed: replayed"


def test_a_checkpoint_the_job_wrote_passes_and_is_left_as_it_was(s3_server, checkpoint):
    store = open_checkpoint(checkpoint, s3_server.storage_options())
    check_checkpoint(store)  # not there yet: the bucket exists and takes writes
    assert objects(store) == {}
    write_checkpoint(store)
    before = objects(store)
    check_checkpoint(store)
    assert objects(store) == before


@pytest.mark.parametrize("part", ["offsets", "tiering"])
def test_a_file_where_a_folder_belongs_is_named(s3_server, checkpoint, part):
    store = open_checkpoint(checkpoint, s3_server.storage_options())
    write_checkpoint(store)
    put(store, part, "a file")
    with pytest.raises(CheckpointError) as refused:
        check_checkpoint(store)
    assert f"checkpoint path {checkpoint}/{part} (" in str(refused.value)
    assert "is a file; expected a directory" in str(refused.value)


def test_a_prefix_that_refuses_writes_and_a_missing_bucket_are_named(s3_server, checkpoint):
    storage = s3_server.storage_options()
    write_checkpoint(open_checkpoint(checkpoint, storage))
    with FaultProxy(s3_server.endpoint) as proxy:
        proxy.add(Rule(Respond(403, ACCESS_DENIED, "application/xml"), method="PUT"))
        through_proxy = open_checkpoint(checkpoint, {**storage, "AWS_ENDPOINT_URL": proxy.url})
        with pytest.raises(
            CheckpointError, match=f"checkpoint directory {checkpoint} \\(the checkpoint\\) does not take writes"
        ):
            check_checkpoint(through_proxy)
        with pytest.raises(
            CheckpointError, match=f"lease file {checkpoint}-new/tiering/lease.json: writing it failed: .*403 Forbidden"
        ):
            load_or_create_lease_id(
                open_checkpoint(f"{checkpoint}-new", {**storage, "AWS_ENDPOINT_URL": proxy.url}), "j"
            )
    with pytest.raises(CheckpointError, match="bucket 'no-such-bucket' does not exist"):
        check_checkpoint(open_checkpoint("s3://no-such-bucket/ckpt", storage))


def test_a_session_without_the_s3a_jars_is_refused_naming_them(spark, s3_server, checkpoint, tmp_path):
    with pytest.raises(ConfigError, match="hadoop-aws's s3a, which is not on Spark's classpath") as refused:
        use_checkpoint_store(spark, open_checkpoint(checkpoint, s3_server.storage_options()))
    assert "deploy/jars/s3a/lib" in str(refused.value)
    assert spark.conf.get("fs.s3a.endpoint", None) is None, "nothing set on a refused session"
    use_checkpoint_store(spark, open_checkpoint(str(tmp_path / "ckpt")))  # a local checkpoint needs nothing
