"""The job: the leader loop -> one term's query (readStream -> foreachBatch -> lake), by concern.

- :mod:`~tiering.job.spark_session`: the SparkSession and the settings the query needs from it;
- :mod:`~tiering.job.query`: :class:`TieringJob`, one term's query, its lease and its maintainer;
- :mod:`~tiering.job.leader`: :func:`run_as_leader`, the leader loop around it;
- :mod:`~tiering.job.one_off`: `tiering maintain` and `tiering resync`, terms of their own;
- :mod:`~tiering.job.group`: a tiering group's member as a term wires it;
- :mod:`~tiering.job.tables`: which of the store's tables the job tiers.

Each module's docstring says how its part fails. The names below are the job's public ones, the
ones the CLI, the spark-submit entry, the demo, the benchmarks and the tests use.
"""

from tiering.job.group import log_size_classes
from tiering.job.leader import run_as_leader
from tiering.job.one_off import maintain_as_leader, resync_as_leader
from tiering.job.query import JobResult, RoundListener, TieringJob
from tiering.job.spark_session import (
    CHECKPOINT_FILE_MANAGER,
    EXECUTOR_ALLOCATOR_CONF,
    PROGRESS_RETENTION,
    REQUIRED_SPARK_CONF,
    S3A_FILESYSTEM,
    build_spark,
    use_checkpoint_store,
)
from tiering.job.tables import included_tables

__all__ = [
    "CHECKPOINT_FILE_MANAGER",
    "EXECUTOR_ALLOCATOR_CONF",
    "PROGRESS_RETENTION",
    "REQUIRED_SPARK_CONF",
    "S3A_FILESYSTEM",
    "JobResult",
    "RoundListener",
    "TieringJob",
    "build_spark",
    "included_tables",
    "log_size_classes",
    "maintain_as_leader",
    "resync_as_leader",
    "run_as_leader",
    "use_checkpoint_store",
]
