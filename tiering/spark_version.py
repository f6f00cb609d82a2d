"""The Spark versions the job runs on, checked when a driver starts (docs/DESIGN.md §4).

Failure mode it guards against: a driver started on a Spark the source was never run with fails
late and obscurely inside Spark (a Python worker's ``TypeError``, a class Spark cannot load) after
it already won leadership. :func:`check` runs first in ``tiering run`` and ``jobs/tiering_job.py``
and refuses a version outside :data:`SUPPORTED` with a :class:`ConfigError` naming it (exit 2).

What differs inside the range, each handled where it matters:

- admission control for Python sources (``latestOffset(start, limit)``, ``getDefaultReadLimit``,
  ``SupportsTriggerAvailableNow``) exists from Spark 4.2 (:data:`ADMISSION_CONTROL_SINCE`). On
  4.0 and 4.1 Spark calls ``latestOffset()`` with neither argument, and runs a source without
  ``SupportsTriggerAvailableNow`` as a single batch under availableNow (its
  ``AvailableNowDataStreamWrapper``): one round, which would leave a failed table or a capped
  round's rest behind. There the source reads its start from the checkpoint's offsets log and
  applies ``limits.*`` itself, and the job runs availableNow as rounds triggered back to back,
  ending the query at the first trigger with nothing to tier, which is when a newer Spark ends it;
- the FileSystem-based checkpoint file manager moved to the ``checkpointing`` package in Spark
  4.1 (:func:`checkpoint_file_manager`).

Spark-free: it compares version strings; only :func:`running` imports ``pyspark.version``.
"""

from __future__ import annotations

import logging
import re

from tiering.errors import ConfigError

__all__ = [
    "ADMISSION_CONTROL_SINCE",
    "SUPPORTED",
    "admission_control",
    "check",
    "checkpoint_file_manager",
    "running",
]

log = logging.getLogger(__name__)

#: The supported range, as ``pyproject.toml`` declares it: [lowest, highest) (major, minor).
SUPPORTED = ((4, 0), (4, 4))
#: The first Spark whose Python streaming sources have admission control and availableNow.
ADMISSION_CONTROL_SINCE = (4, 2)

_VERSION = re.compile(r"(\d+)\.(\d+)")
_RANGE = f">={SUPPORTED[0][0]}.{SUPPORTED[0][1]},<{SUPPORTED[1][0]}.{SUPPORTED[1][1]}"


def running() -> str:
    """The version of the pyspark this process imports (spark-submit's own, under spark-submit)."""
    from pyspark.version import __version__

    return __version__


def _minor(version: str) -> tuple[int, int] | None:
    match = _VERSION.match(version.strip())
    return (int(match[1]), int(match[2])) if match else None


def check(version: str | None = None) -> str:
    """``version`` (default: :func:`running`) if the job supports it, else :class:`ConfigError`."""
    version = running() if version is None else version
    minor = _minor(version)
    if minor is None or not SUPPORTED[0] <= minor < SUPPORTED[1]:
        raise ConfigError(
            [
                f"Spark {version!r} is not supported: kv-tiering runs on pyspark {_RANGE} "
                '(docs/deploying.md, "Spark versions"); install one of those, or run spark-submit of one'
            ]
        )
    if not admission_control(version):
        log.info(
            "Spark %s: Python sources have no admission control (Spark >= %s): the source reads its start "
            "from the offsets log and caps rounds by limits.* itself; availableNow runs rounds back to back "
            "until one finds nothing to tier",
            version,
            ".".join(map(str, ADMISSION_CONTROL_SINCE)),
        )
    return version


def admission_control(version: str) -> bool:
    """Does Spark ``version`` give Python streaming sources admission control and availableNow?"""
    minor = _minor(version)
    return minor is not None and minor >= ADMISSION_CONTROL_SINCE


def checkpoint_file_manager(version: str) -> str:
    """The class name of Spark ``version``'s FileSystem-based checkpoint file manager."""
    package = "org.apache.spark.sql.execution.streaming"
    minor = _minor(version)
    if minor is not None and minor < (4, 1):
        return f"{package}.FileSystemBasedCheckpointFileManager"
    return f"{package}.checkpointing.FileSystemBasedCheckpointFileManager"
