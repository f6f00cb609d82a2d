"""Lake files read by a bucket rewrite on S3: the Delta log gives their sizes, so no HEAD is
sent for them (a round trip of three per file, tens of ms on S3). A proxy in front of the real
server refuses every HEAD of the lake file: a read that still sent one would fail."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.fault_proxy import FaultProxy, Respond, Rule
from tests.support.store_files import write_log
from tests.support.tables import kv_table
from tiering.delta_log.lake import LakeFile
from tiering.objectstore.object_store import ObjectStore
from tiering.writers.bucket_plan import BucketBase, BucketPlan
from tiering.writers.buckets import BucketTask, file_schema, run_task
from tiering.writers.buckets.reads import read_batches

pytestmark = pytest.mark.integration

TABLE = kv_table({"id": "bigint", "v": "string"})


def test_a_lake_file_of_known_size_is_read_without_a_head(s3_server, tmp_path):
    with FaultProxy(s3_server.endpoint) as proxy:
        store = ObjectStore.of(
            f"{s3_server.root}/{uuid.uuid4().hex[:12]}", {**s3_server.storage_options(), "AWS_ENDPOINT_URL": proxy.url}
        )
        table_uri = store.uri("t")
        rel = "__bucket=0/part-old.parquet"
        with store.filesystem.open_output_stream(store.path(f"{table_uri}/{rel}")) as out:
            pq.write_table(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}), out)
        size = store.filesystem.get_file_info(store.path(f"{table_uri}/{rel}")).size
        lake = LakeFile(f"{table_uri}/{rel}", rel, size, 3, 1, 3)
        refused = proxy.add(Rule(Respond(500, b"no HEAD here"), method="HEAD", path="part-old"))
        log = write_log(tmp_path / "log", TABLE, [(3, "+U", {"id": 2, "v": "B"})])
        plan = BucketPlan(0, BucketBase.LAKE, (lake.uri,), (log,), 3, 4, lake_files=(lake,))

        result = run_task(BucketTask(TABLE, table_uri, plan, store))

        assert result.error is None and result.replaced == (rel,)
        rows = [
            pq.read_table(store.path(f"{table_uri}/{f.path}"), filesystem=store.filesystem).to_pylist()
            for f in result.files
        ]
        assert [[(r["id"], r["v"]) for r in file] for file in rows] == [[(1, "a"), (2, "B"), (3, "c")]]
        assert refused.injected == 0
        with pytest.raises(OSError):  # the control: opened by path, the file costs a HEAD first
            list(read_batches(store, [lake.uri], file_schema(TABLE)))
        assert refused.injected >= 1
