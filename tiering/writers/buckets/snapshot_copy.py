"""A bootstrap bucket copied byte for byte: when its snapshot files already have the lake's
columns and no change lands on top, nothing is decoded. The store writes immutable Parquet
with exactly the lake file's columns, so a copy is a valid lake file; its statistics come from
its footer. Copies keep the store's codec (zstd); files a rewrite encodes get
``lake.compression``'s. A snapshot taken before a column was added lacks it: not copyable,
so it is rewritten (:mod:`~tiering.writers.buckets.rewrite`)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from tiering.objectstore.landed import copy_object
from tiering.writers.buckets.new_files import file_name, landing, written_file
from tiering.writers.buckets.stats import FileStats
from tiering.writers.buckets.task import BucketTask, WrittenFile

__all__ = ["copyable", "copy_file"]


def copyable(task: BucketTask, schema: pa.Schema) -> bool:
    """A snapshot bucket with nothing on top, whose files have exactly the lake file's columns."""
    plan = task.plan
    if not plan.bare_snapshot or not plan.base_files:
        return False
    fs, paths = task.store.locate(plan.base_files)
    return all(pq.read_schema(fs.open_input_file(p)).equals(schema, check_metadata=False) for p in paths)


def copy_file(task: BucketTask, source: str, schema: pa.Schema) -> WrittenFile:
    """One snapshot file copied into the bucket as it is; statistics from its footer."""
    fs, (path,) = task.store.locate([source])
    rel = file_name(task.plan)
    with fs.open_input_file(path) as reader:
        meta = pq.read_metadata(reader)
        reader.seek(0)
        size = copy_object(reader, landing(task, rel))
    stats = FileStats(schema)
    stats.add_footer(meta)
    return written_file(task, rel, size, stats)
