"""Running a Spark partition's bucket tasks (executor side), and one task: a byte copy
(:mod:`~tiering.writers.buckets.snapshot_copy`) or a rewrite (:mod:`~tiering.writers.buckets.rewrite`).
Fails by value: every error comes back as a :class:`BucketResult`, never raised, so one
bucket's failure fails its table only; memory is bounded by running one heavy rewrite at a time."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext

from tiering import failpoints
from tiering.writers.bucket_plan import heavy
from tiering.writers.buckets.rewrite import rewrite
from tiering.writers.buckets.snapshot_copy import copy_file, copyable
from tiering.writers.buckets.task import BucketResult, BucketTask, WrittenFile, file_schema

__all__ = ["PARTITION_THREADS", "run_tasks", "run_task", "light", "write_bucket"]

#: Threads of a Spark partition for its light tasks (:func:`run_tasks`).
PARTITION_THREADS = 8


def run_tasks(tasks: Iterable[BucketTask]) -> Iterator[BucketResult]:
    """A Spark partition's tasks (executor side): the light ones (:func:`light`) on
    :data:`PARTITION_THREADS` threads, the others one at a time beside them. A task of a tiny
    bucket is a few object-store requests, each a round trip (tens of ms on S3), and a
    partition holds hundreds of them in a round of many tables: one after another, the round
    waits for every trip in turn. The threads release the GIL while they wait and while pyarrow
    works; a heavy rewrite holds its rows in memory, so only one runs at a time, a snapshot
    that turns out not to be copyable (its columns differ from the lake's) included."""
    failpoints.hit("executor_bucket_write")
    one_heavy = threading.Lock()
    in_turn: list[BucketTask] = []
    with ThreadPoolExecutor(PARTITION_THREADS, thread_name_prefix="bucket") as pool:
        futures = []
        for task in tasks:
            if light(task):
                futures.append(pool.submit(run_task, task, one_heavy))
            else:
                in_turn.append(task)
        for task in in_turn:
            yield run_task(task, one_heavy)
        for future in futures:
            yield future.result()


def light(task: BucketTask) -> bool:
    """Whether the task goes on a partition's threads: a snapshot without changes (normally a
    byte copy, streamed) or a rewrite that is not :func:`~tiering.writers.bucket_plan.heavy`.
    Decided from the plan alone, so a bare snapshot counts as light though :func:`heavy` calls
    it heavy: whether its columns allow the copy takes its footers, read on the task's thread,
    and one that turns out not to be copyable takes its turn there (:func:`run_task`)."""
    plan = task.plan
    return plan.bare_snapshot or not heavy([plan])


def run_task(task: BucketTask, one_heavy: AbstractContextManager[object] | None = None) -> BucketResult:
    """The bucket's write as a Spark task: every error comes back as a result. A heavy rewrite
    (a snapshot's, of unknown size, included) holds ``one_heavy`` while it runs."""
    try:
        files, replaced = _write(task, one_heavy)
        return BucketResult(task.table.name, task.plan.bucket, tuple(files), replaced=replaced)
    except Exception as e:  # noqa: BLE001 - reported to the driver, which fails the table
        return BucketResult(
            task.table.name, task.plan.bucket, error=f"bucket {task.plan.bucket}: {type(e).__name__}: {e}"
        )


def write_bucket(task: BucketTask) -> list[WrittenFile]:
    """Write ``task``'s bucket as it is after the round; no file when it ends up empty (for a
    rewrite by file: the files replacing those it rewrote, see :func:`run_task`)."""
    return _write(task)[0]


def _write(
    task: BucketTask, one_heavy: AbstractContextManager[object] | None = None
) -> tuple[list[WrittenFile], tuple[str, ...]]:
    """The files written, and the lake files they replace when the bucket is rewritten by file
    (a heavy rewrite holding ``one_heavy``)."""
    schema = file_schema(task.table)
    plan = task.plan
    if copyable(task, schema):
        return [copy_file(task, path, schema) for path in plan.base_files], ()
    with one_heavy if one_heavy is not None and heavy([plan]) else nullcontext():
        return rewrite(task, schema)
