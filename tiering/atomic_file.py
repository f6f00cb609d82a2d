"""Local files written whole: a reader sees the old file or the new one, never half of one.

Failure mode: a reader (the planning process, Spark on another machine, a driver restarted from
its checkpoint) that finds a half-written file, or a crash that leaves the new name over bytes
that never reached the disk. A file is written under a temporary name in its own directory (a
rename is atomic only within one filesystem), synced, then moved onto its name:
:func:`replacing` and :func:`replace_file` replace what is there (``os.replace``);
:func:`create_file` *links* it into place, which fails when the name exists, so of two writers
racing to create one file exactly one does. A write that fails removes its temporary file and
leaves the target as it was. Temporary names are hidden (a leading dot: Spark's and the store's
listings skip them) and unique per process and call, so two writers never share one.

Local disks only: on S3 an object is never seen half-written, and the checkpoint's S3 side
(:class:`tiering.state.checkpoint_store.S3Checkpoint`) writes one PUT, or a conditional one.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["create_file", "replace_file", "replacing"]


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """The temporary path to write ``path``'s new content at; when the block ends without an
    error, that file is synced and replaces ``path``. The directory must exist."""
    tmp = _temporary(path)
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def replace_file(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``, whole."""
    with replacing(path) as tmp:
        tmp.write_bytes(data)


def create_file(path: Path, data: bytes) -> bool:
    """Create ``path`` holding ``data`` unless it exists: True when this call created it. The
    synced temporary file is linked into place (``os.link`` fails when the target exists, where
    ``os.replace`` would let a loser overwrite the winner), and the new directory entry synced."""
    tmp = _temporary(path)
    try:
        tmp.write_bytes(data)
        _fsync(tmp)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        _fsync(path.parent)
    finally:
        tmp.unlink(missing_ok=True)
    return True


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")


def _fsync(path: Path) -> None:
    """Make ``path``'s bytes (a file) or its entries (a directory) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
