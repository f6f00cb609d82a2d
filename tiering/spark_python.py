"""The Python interpreter Spark starts for the job's source, checked on the driver before Spark starts.

Failure mode it guards against: Spark 4 runs a Python data source's planning (the kv-tiering
source's schema, offsets and partitions) in Python processes that the driver's JVM starts, with the
interpreter the executors' workers get: ``PYSPARK_PYTHON`` (spark-submit sets it from
``spark.pyspark.python``), not the driver's own Python (``PYSPARK_DRIVER_PYTHON``). A relative path
meant for the executors, ``./environment/bin/python`` of a packed virtualenv that ``--archives``
unpacks in each executor's working directory, is looked up in the driver's working directory too;
missing there, the query fails at its first plan, after the job won leadership, with Java's
"Cannot run program" at the end of a long traceback. :func:`check` runs first in ``tiering run``
and the spark-submit entry and refuses such an interpreter with a :class:`ConfigError` naming it
and the directory (exit 2); docs/deploying.md says how to give the driver its copy.

Spark-free: it reads the environment and the file system only.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from tiering.errors import ConfigError

__all__ = ["check"]


def check(environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> str:
    """``PYSPARK_PYTHON`` from ``environ`` (default: this process's) if the driver's JVM can start it
    from ``cwd`` (default: this process's, which spark-submit's JVM shares), else :class:`ConfigError`.
    Unset, Spark starts ``python3`` from ``PATH``, as the JVM would."""
    environ = os.environ if environ is None else environ
    cwd = Path.cwd() if cwd is None else cwd
    python = environ.get("PYSPARK_PYTHON") or "python3"
    if os.sep in python:
        target = cwd / python  # an absolute path stays itself
        found, where = target.is_file() and os.access(target, os.X_OK), f"in the driver's directory {cwd}"
    else:
        found, where = shutil.which(python, path=environ.get("PATH", os.defpath)) is not None, "on the driver's PATH"
    if not found:
        raise ConfigError(
            [
                f"PYSPARK_PYTHON={python!r}: no such interpreter {where}; Spark runs the kv-tiering source's "
                "planning on the driver with the executors' Python (spark.pyspark.python, PYSPARK_PYTHON): a "
                "packed environment shipped with --archives must be unpacked there too (docs/deploying.md)"
            ]
        )
    return python
