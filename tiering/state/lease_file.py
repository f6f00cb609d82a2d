"""The job's lease id, stored once in the streaming checkpoint (docs/DESIGN.md §4).

Failure mode: a query restarted from its checkpoint that made up a new lease id would leak
the old lease's holds until it expires, and two ids for one job would each pin snapshots.
So the id is created once, with a write that is atomic and no-clobber: the file is written
and fsynced under a temporary name, then *linked* into place. ``os.link`` fails when the
target exists, so of two drivers racing on a fresh checkpoint exactly one id wins and both
return it (``os.replace`` would let the loser overwrite the winner's id after the winner had
started using it). A file that exists but does not parse is an error, never a reason to
make a new id: it is a :class:`CheckpointError` naming the file. A write that did not land
(a full or failing disk: a short file, an fsync error) is found before the id is used: the
linked file is read back and must hold the id written, else a :class:`CheckpointError` names
the file and what it holds.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path
from urllib.parse import urlparse

from tiering.errors import CheckpointError

__all__ = ["checkpoint_dir", "job_of_lease", "lease_file_path", "load_or_create_lease_id", "new_lease_id", "read_lease_id"]

_DIR = "tiering"
_FILE = "lease.json"
#: A lease id: ``<job>-<uuid4 hex>``. The hex part has no ``-`` and a fixed length, so the job is
#: whatever comes before its last ``-``: job ``orders``'s ids never match job ``orders-eu``'s.
_LEASE_ID = re.compile(r"(?P<job>.+)-[0-9a-f]{32}")


def new_lease_id(job: str) -> str:
    """A fresh lease id of ``job`` (the checkpoint's, or a one-off command's own)."""
    if not job:
        raise ValueError("job name is empty: the lease id is prefixed with it")
    return f"{job}-{uuid.uuid4().hex}"


def job_of_lease(lease_id: str) -> str | None:
    """The job a lease id was made for, read exactly (not by prefix); None for an id of another form."""
    found = _LEASE_ID.fullmatch(lease_id)
    return found["job"] if found else None


def lease_file_path(checkpoint: str) -> Path:
    """``<checkpoint>/tiering/lease.json``."""
    return checkpoint_dir(checkpoint) / _DIR / _FILE


def checkpoint_dir(checkpoint: str) -> Path:
    """The checkpoint's directory; the checkpoint is a local path or a ``file:`` URI."""
    if not checkpoint:
        raise CheckpointError("checkpoint location is empty")
    parsed = urlparse(checkpoint)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise CheckpointError(f"checkpoint {checkpoint!r}: file URI with remote host {parsed.netloc!r}")
        local = parsed.path
    elif parsed.scheme and len(parsed.scheme) > 1:  # one letter is a Windows drive, not a scheme
        raise CheckpointError(f"checkpoint {checkpoint!r}: only local paths and file: URIs are supported")
    else:
        local = checkpoint
    return Path(local)


def read_lease_id(checkpoint: str) -> str | None:
    """The lease id kept in ``checkpoint``, or None when there is none yet; never creates one
    (for readers such as ``tiering status``)."""
    path = lease_file_path(checkpoint)
    return _read(path) if path.exists() else None


def load_or_create_lease_id(checkpoint: str, job: str) -> str:
    """The lease id of this checkpoint: created on first call (``<job>-<uuid4 hex>``), then
    always the same one."""
    lease_id = new_lease_id(job)
    path = lease_file_path(checkpoint)
    if path.exists():
        return _read(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{_FILE}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"lease_id": lease_id, "job": job}, f)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return _read(path)
        _fsync_dir(path.parent)
    except OSError as e:
        raise CheckpointError(f"lease file {path}: writing it failed: {e}") from e
    finally:
        tmp.unlink(missing_ok=True)
    landed = _read(path)
    if landed != lease_id:
        raise CheckpointError(f"lease file {path} holds {landed!r} right after {lease_id!r} was written to it")
    return lease_id


def _read(path: Path) -> str:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CheckpointError(f"lease file {path} is unreadable or not JSON ({e}); restore it or remove it "
                              "knowingly (a new lease id leaves the old lease to expire)") from None
    lease_id = data.get("lease_id") if isinstance(data, dict) else None
    if not isinstance(lease_id, str) or not lease_id:
        raise CheckpointError(f"lease file {path} has no 'lease_id' string: {data!r}")
    return lease_id


def _fsync_dir(directory: Path) -> None:
    """Make the new directory entry durable, not only the file's bytes."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
