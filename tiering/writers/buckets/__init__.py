"""One bucket's new data files, written where the lake is, from inside a Spark task (executor side).

A round rewrites what it touches copy-on-write: base rows — a snapshot's files, or lake files —
minus the keys the round changed, plus the newest upsert of each changed key. This package does
that for one bucket with pyarrow, writes the result straight into ``<table>/__bucket=<b>/``
through the object store (local disk or S3), and returns the file descriptions the driver needs
for its one Delta commit. No staging, no rename: the driver and the executors need not share a
filesystem.

Write amplification (a round's cost growing with the table, not with its changes) is what the
layout is for: a bucket is kept as key-sorted files of about the round's file target, each with
its first key column's min/max in its statistics. A bucket already in the lake is rewritten by
file: only the files whose range could hold a changed key are read, changed, split into files
of about the target and replaced. Everything else (a bootstrap that decodes its rows, a
whole-bucket rewrite) is written the same way: sorted, split at the target.

One module per concern, each stating how it fails:

- :mod:`.task` — what a task is given and returns (values that travel to and from executors);
- :mod:`.schedule` — a Spark partition's tasks on threads, one heavy rewrite at a time;
- :mod:`.key_ranges` — which lake files a round rewrites, and which changes land in each;
- :mod:`.rewrite` — the sorted rewrite, split at the target;
- :mod:`.snapshot_copy` — a bootstrap's snapshot files copied byte for byte;
- :mod:`.encoding` — dictionary columns and rows per file, from a sample;
- :mod:`.reads` — base rows and the bucket's newest changes;
- :mod:`.new_files` — where a new file lands, checked to have landed;
- :mod:`.stats` — the Delta statistics of a written or copied file;
- :mod:`.merge_source` — the change-feed MERGE's source rows.
"""

from tiering.writers.buckets.key_ranges import RewriteGroup, rewrite_groups
from tiering.writers.buckets.merge_source import base_rows, merge_batches
from tiering.writers.buckets.schedule import light, run_task, run_tasks, write_bucket
from tiering.writers.buckets.task import BucketResult, BucketTask, WrittenFile, file_schema

__all__ = [
    "BucketTask",
    "BucketResult",
    "WrittenFile",
    "RewriteGroup",
    "write_bucket",
    "run_task",
    "run_tasks",
    "light",
    "file_schema",
    "merge_batches",
    "base_rows",
    "rewrite_groups",
]
