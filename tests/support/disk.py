"""The free disk space a test session needs before it starts.

The embedded SeaweedFS (``tests/fixtures/s3.py``) does not refuse a write when its disk is nearly
full: it holds each PUT for a minute first, and every S3 test then fails on a timeout that names
nothing about the disk. The session checks the temporary directory's filesystem first and stops
with one line saying what is missing instead.
"""

from __future__ import annotations

import shutil
import tempfile

#: What a session writes at most (stores, checkpoints, lakes, Spark's scratch), with the share of
#: the filesystem SeaweedFS keeps free for itself (its volume servers' ``-minFreeSpace``, 1%).
SESSION_BYTES = 4 << 30
KEPT_FREE_SHARE = 0.01


def disk_shortfall(path: str | None = None) -> str | None:
    """A sentence naming the filesystem of ``path`` (the temporary directory by default) and what
    it lacks, or None when it has room for a session."""
    path = path or tempfile.gettempdir()
    usage = shutil.disk_usage(path)
    needed = SESSION_BYTES + int(usage.total * KEPT_FREE_SHARE)
    if usage.free >= needed:
        return None
    gib = 1 << 30
    return (
        f"only {usage.free / gib:.1f} GiB free on the filesystem of {path}; the tests need "
        f"{needed / gib:.1f} GiB (the embedded S3 server stalls every write on a nearly full disk)"
    )
