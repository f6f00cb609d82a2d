"""Running a round's bucket writes on the executors: one Spark job for every table of the round.

Failure modes: a round of many tables paying a Spark job (scheduling, Python workers) per
table, and one table's failing bucket failing the others' writes. All tables' bucket tasks go
into one job; a task's failure comes back as its result (see :func:`tiering.writers.buckets.run_task`),
so the committer fails that table alone. Tasks are grouped into a few partitions per core:
a round of hundreds of tiny buckets does not launch hundreds of Spark tasks, and a partition
runs its tiny buckets on threads (:func:`tiering.writers.buckets.run_tasks`), so their
object-store round trips overlap instead of adding up.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from pyspark.sql import SparkSession

from tiering.writers.buckets import BucketResult, BucketTask, run_tasks

__all__ = ["run_bucket_tasks"]

#: Partitions per core of the cluster: enough to balance uneven buckets, few enough to keep
#: task launches cheap.
PARTITIONS_PER_CORE = 4


def run_bucket_tasks(spark: SparkSession, tasks: Sequence[BucketTask]) -> dict[str, list[BucketResult]]:
    """Every task's result, by table name ({} without tasks: no job)."""
    if not tasks:
        return {}
    context = spark.sparkContext
    slices = min(len(tasks), max(1, context.defaultParallelism) * PARTITIONS_PER_CORE)
    by_table: dict[str, list[BucketResult]] = defaultdict(list)
    for result in context.parallelize(list(tasks), slices).mapPartitions(run_tasks).collect():
        by_table[result.table].append(result)
    return dict(by_table)
