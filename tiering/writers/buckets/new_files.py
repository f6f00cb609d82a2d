"""Where a task's new file lands, and its description for the commit. Files get fresh names and
Delta readers see only files a commit adds, so a task that dies (or a commit that loses a race)
leaves unreferenced files, which the driver deletes when it knows and a full VACUUM otherwise.
A file that did not land (the store refused a part, timed out, lost it) is found by one HEAD
with every byte written (:mod:`tiering.objectstore.landed`): an
:class:`~tiering.errors.ObjectWriteError` then names the object and fails the bucket, so no
commit references a file that is not there."""

from __future__ import annotations

import time
import uuid

from tiering.delta_log.layout import BUCKET_COLUMN
from tiering.objectstore.landed import LandedObject
from tiering.writers.bucket_plan import BucketPlan
from tiering.writers.buckets.stats import FileStats
from tiering.writers.buckets.task import BucketTask, WrittenFile

__all__ = ["file_name", "landing", "written_file"]


def file_name(plan: BucketPlan) -> str:
    """A fresh name for a file of the plan's bucket, relative to the table root."""
    return f"{BUCKET_COLUMN}={plan.bucket}/part-{uuid.uuid4().hex}-r{plan.log_to}.parquet"


def landing(task: BucketTask, rel: str) -> LandedObject:
    """The new file ``rel`` of the task's table, checked to have landed when written (S3 has no
    directories to create: a local one is made first)."""
    store = task.store
    uri = f"{task.table_uri}/{rel}"
    target = store.path(uri)
    if not store.is_s3:
        store.filesystem.create_dir(target.rsplit("/", 1)[0], recursive=True)
    return LandedObject(store.filesystem, target, uri)


def written_file(task: BucketTask, rel: str, size: int, stats: FileStats) -> WrittenFile:
    """The description of the landed file ``rel`` the commit adds, modified now."""
    return WrittenFile(rel, task.plan.bucket, size, stats.rows, stats.to_json(), int(time.time() * 1000))
