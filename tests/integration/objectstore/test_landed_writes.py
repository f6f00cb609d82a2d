"""A lake write the object store refused fails its bucket, naming the object, the request and the
store's answer, on a real S3 server whose identities refuse parts of the protocol.

The silent case first, as a new user met it: ``pyarrow.fs.copy_files`` into a store that refuses
``UploadPart`` returns without an error and no object exists (pyarrow only logs "Error ignored
when destroying file"). The bucket writer no longer goes through it.
"""

from __future__ import annotations

import dataclasses
import os

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from tests.integration.objectstore.conftest import RefusingS3
from tests.support.store_files import write_snapshot
from tests.support.tables import kv_table
from tiering.errors import ObjectWriteError
from tiering.objectstore.object_store import ObjectStore
from tiering.writers.bucket_plan import BucketBase, BucketPlan
from tiering.writers.buckets import BucketTask, run_task, write_bucket

pytestmark = pytest.mark.integration

TABLE = kv_table({"id": "bigint", "v": "string"})
#: Past pyarrow's S3 part size: the file goes up as a multipart upload.
_BIG_ROWS = 4000


def _store(refusing_s3: RefusingS3, identity: str, prefix: str) -> ObjectStore:
    return ObjectStore.of(refusing_s3.root(prefix), refusing_s3.storage_options(identity), env={})


def _snapshot_plan(tmp_path, rows: int) -> BucketPlan:
    """A snapshot bucket with nothing on top (copied byte for byte), of incompressible values."""
    values = [({"id": i, "v": os.urandom(2500).hex()}, i) for i in range(rows)]
    snap = write_snapshot(tmp_path / "s", TABLE, values)
    return BucketPlan(
        bucket=0, base=BucketBase.SNAPSHOT, base_files=(snap,), log_files=(), log_from=rows, log_to=rows, snapshot_id=1
    )


def test_pyarrow_copy_files_loses_a_refused_multipart_upload_silently(refusing_s3, tmp_path):
    """The library behaviour behind the issue, kept as a fact: no error, no object."""
    store = _store(refusing_s3, "no-multipart", "silent")
    (source,) = _snapshot_plan(tmp_path, _BIG_ROWS).base_files
    target = store.path(f"{store.root}/copied.parquet")

    pafs.copy_files(source, target, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=store.filesystem)

    assert store.filesystem.get_file_info(target).type == pafs.FileType.NotFound


def test_a_snapshot_copy_refused_by_the_store_fails_naming_object_request_and_answer(refusing_s3, tmp_path):
    store = _store(refusing_s3, "no-multipart", "copy")
    task = BucketTask(TABLE, store.uri("t"), _snapshot_plan(tmp_path, _BIG_ROWS), store)

    with pytest.raises(ObjectWriteError) as refused:
        write_bucket(task)

    error = refused.value
    assert error.key.startswith(f"{store.uri('t')}/__bucket=0/part-") and error.key.endswith(".parquet")
    assert error.operation == "UploadPart" and error.answer.startswith("ACCESS_DENIED"), error
    result = run_task(task)  # as an executor reports it: the bucket fails, with the same words
    assert result.files == () and "ObjectWriteError" in result.error and "UploadPart" in result.error
    assert "ACCESS_DENIED" in result.error and f"{store.uri('t')}/__bucket=0/part-" in result.error


def test_the_same_store_takes_a_small_file_in_one_put(refusing_s3, tmp_path):
    """Small files are one PutObject (no multipart), so this identity can still tier small buckets."""
    store = _store(refusing_s3, "no-multipart", "small")
    task = BucketTask(TABLE, store.uri("t"), _snapshot_plan(tmp_path, 3), store)

    (written,) = write_bucket(task)

    info = store.filesystem.get_file_info(store.path(f"{store.uri('t')}/{written.path}"))
    assert (info.type, info.size) == (pafs.FileType.File, written.size)


def test_a_rewritten_bucket_refused_by_the_store_fails_naming_the_put(refusing_s3, tmp_path):
    store = _store(refusing_s3, "no-put", "rewrite")
    snap = write_snapshot(tmp_path / "s", dataclasses.replace(TABLE, columns=TABLE.columns[:1]), [({"id": 1}, 0)])
    plan = BucketPlan(
        bucket=0, base=BucketBase.SNAPSHOT, base_files=(snap,), log_files=(), log_from=1, log_to=1, snapshot_id=1
    )

    with pytest.raises(ObjectWriteError) as refused:
        write_bucket(BucketTask(TABLE, store.uri("t"), plan, store))

    assert refused.value.operation == "PutObject" and refused.value.answer.startswith("ACCESS_DENIED")
    assert str(refused.value).startswith(f"object store write of {store.uri('t')}/__bucket=0/part-")


def test_a_written_file_is_the_bytes_written(refusing_s3, tmp_path):
    """The check after the write is one HEAD: the object as big as what was written."""
    store = _store(refusing_s3, "no-put", "read-only")
    readable = ObjectStore.of(refusing_s3.server.root + "/ok", refusing_s3.server.storage_options(), env={})
    task = BucketTask(TABLE, readable.uri("t"), _snapshot_plan(tmp_path, 20), readable)

    (written,) = write_bucket(task)

    with readable.filesystem.open_input_file(readable.path(f"{readable.uri('t')}/{written.path}")) as handle:
        assert handle.size() == written.size and pq.read_table(handle).num_rows == 20
    assert store.filesystem.get_file_info(store.path(f"{readable.uri('t')}/{written.path}")).size == written.size
