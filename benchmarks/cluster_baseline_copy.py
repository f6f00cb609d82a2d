"""The snapshot copy written by hand as a Spark job: the baseline of ``bench_cluster.py``.

    spark-submit --master spark://HOST:PORT benchmarks/cluster_baseline_copy.py PLAN.json

What the tiering service does in a table's first round, without the service: one task per
bucket reads the store's snapshot files with pyarrow and writes them as one Parquet file under
``<table>/__bucket=<b>/`` in the S3 lake; the driver adds every file in one delta-rs commit. No
planning, no lease, no fencing, no report to the store: what a copy of these files costs on
this cluster, submitted the same way as the job. Deliberately free of the ``tiering`` package,
so nothing of the service leaks into its own yardstick.

PLAN.json: ``{"table_uri": "s3://bucket/prefix/table", "storage": {delta-rs storage options},
"buckets": {"<b>": [snapshot file, ...]}}``. The last output line is ``baseline_copy: {json}``:
the seconds of the Spark job (``copy_s``) and of the commit (``commit_s``), measured once the
SparkContext is up, to set against the service's round alone.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path


def s3_filesystem(storage: dict[str, str]):
    """pyarrow's S3 client for delta-rs storage options (an HTTP endpoint on loopback)."""
    import pyarrow.fs as pafs

    endpoint = storage["AWS_ENDPOINT_URL"]
    return pafs.S3FileSystem(
        endpoint_override=endpoint.split("://", 1)[1],
        scheme=endpoint.split("://", 1)[0],
        access_key=storage["AWS_ACCESS_KEY_ID"],
        secret_key=storage["AWS_SECRET_ACCESS_KEY"],
        region=storage["AWS_REGION"],
    )


def copy_bucket(bucket: int, files: list[str], table_uri: str, storage: dict[str, str]) -> dict:
    """Executor side: ``files`` decoded and written again as one file of the bucket's partition."""
    import pyarrow.parquet as pq

    fs = s3_filesystem(storage)
    relative = f"__bucket={bucket}/part-{uuid.uuid4().hex}.parquet"
    target = f"{table_uri.removeprefix('s3://')}/{relative}"
    rows = 0
    with pq.ParquetWriter(target, pq.read_schema(files[0]), filesystem=fs) as writer:
        for path in files:
            for batch in pq.ParquetFile(path).iter_batches():
                writer.write_batch(batch)
                rows += batch.num_rows
    return {"path": relative, "bucket": bucket, "size": fs.get_file_info(target).size, "rows": rows}


def main(plan_path: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import Schema
    from deltalake.transaction import AddAction, create_table_with_add_actions
    from pyspark.sql import SparkSession

    plan = json.loads(Path(plan_path).read_text())
    uri, storage = plan["table_uri"], plan["storage"]
    buckets = sorted((int(b), files) for b, files in plan["buckets"].items() if files)
    spark = SparkSession.builder.appName("kv-tiering-baseline-copy").getOrCreate()
    started = time.perf_counter()
    written = (
        spark.sparkContext.parallelize(buckets, len(buckets))
        .map(lambda item: copy_bucket(item[0], item[1], uri, storage))
        .collect()
    )
    copied = time.perf_counter()
    schema = pq.read_schema(buckets[0][1][0]).append(pa.field("__bucket", pa.int32()))
    now_ms = int(time.time() * 1000)
    adds = [
        AddAction(
            w["path"], w["size"], {"__bucket": str(w["bucket"])}, now_ms, True, json.dumps({"numRecords": w["rows"]})
        )
        for w in written
    ]
    create_table_with_add_actions(
        uri, Schema.from_arrow(schema), adds, partition_by=["__bucket"], storage_options=storage
    )
    committed = time.perf_counter()
    spark.stop()
    print(
        "baseline_copy: "
        + json.dumps(
            {
                "copy_s": round(copied - started, 3),
                "commit_s": round(committed - copied, 3),
                "rows": sum(w["rows"] for w in written),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main(sys.argv[1])
