"""The Java the JVMs this package starts run on: the embedded ZooKeeper, a Fluss cluster's
processes, the gateway JVM of Fluss's Java client.

Failure mode: a JVM started with a java that is not there fails as a bare FileNotFoundError
naming nothing to fix. :func:`find_java` names where it looked, before anything starts.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tiering.errors import JavaNotFoundError

__all__ = ["find_java"]


def find_java() -> str:
    """``$JAVA_HOME/bin/java`` when set and there, else ``java`` on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("java")
    if found:
        return found
    raise JavaNotFoundError(
        f"no java at $JAVA_HOME/bin/java (JAVA_HOME={java_home!r}) and none on PATH; install Java 17 or set JAVA_HOME"
    )
