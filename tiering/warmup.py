"""Executors' Python workers started while the query starts, not by the round's first Spark job.

Failure mode it guards against: a first round that waits for every executor to start its Python
worker (a fresh interpreter that imports pyspark, then the round's own modules: pyarrow,
deltalake, the bucket writer) only once the round's planning is done, although the executors sat
idle through the seconds the query took to start. :func:`warm_executors` runs one tiny job in a
background thread while the driver starts the query: each task imports what a round's task
imports, and Spark keeps the worker for the next task (``spark.python.worker.reuse``, on by
default), so the round's tasks find it started. A store whose reader keeps something per worker (Fluss's:
a gateway JVM, started cold) is handed in as ``prepare``, which each task also runs: the caller
passes a callable that, unpickled in the worker, is the same per-process object the round's tasks
unpickle, so they find it started too.

A warm-up is an optimisation only: it reads and writes nothing, and a failure (an executor lost,
the context stopped while it runs) is logged and forgotten; the round then starts its workers
itself, as without it. Spark runs jobs first come, first served: a round job submitted while the
warm-up runs waits for its tasks, which do no more than the round's tasks would have done first.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator

log = logging.getLogger(__name__)

#: What a round's executor task imports (:func:`tiering.writers.executor_writes.run_bucket_tasks`
#: runs :func:`tiering.writers.buckets.schedule.run_tasks`).
EXECUTOR_MODULES = ("tiering.writers.buckets.schedule",)

#: Shown for the warm-up's job in Spark's UI and event log.
JOB_DESCRIPTION = "kv-tiering: start the executors' Python workers"


#: What a warm-up task runs in its Python worker besides the imports (see :func:`warm_executors`)
Prepare = Callable[[], object]


def import_modules(partition: Iterable[int], prepare: Prepare | None = None) -> Iterator[int]:
    """A warm-up task (executor side): import the round's modules in this Python worker, then run
    ``prepare``."""
    for name in EXECUTOR_MODULES:
        importlib.import_module(name)
    if prepare is not None:
        prepare()
    yield from partition


def warm_executors(spark, prepare: Prepare | None = None) -> threading.Thread:
    """Start, in a daemon thread, one task per core of the cluster that imports the round's
    executor modules and runs ``prepare`` (a picklable callable: what the round's reads would
    otherwise start in each worker; it must read and write nothing); returns the thread (nothing
    waits for it)."""

    def run() -> None:
        try:
            context = spark.sparkContext
            context.setJobDescription(JOB_DESCRIPTION)  # a thread-local property: this thread's jobs only
            slices = max(1, context.defaultParallelism)
            tasks = context.parallelize(range(slices), slices)
            tasks.mapPartitions(lambda partition: import_modules(partition, prepare)).count()
        except Exception as e:  # an optimisation only: the round starts its workers itself
            log.debug("executors' Python workers not warmed up: %s", e)

    thread = threading.Thread(target=run, name="warm-executors", daemon=True)
    thread.start()
    return thread
