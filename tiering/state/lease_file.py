"""The job's lease id, stored once in the streaming checkpoint (docs/DESIGN.md §4), local or on S3.

Failure mode: a query restarted from its checkpoint that made up a new lease id would leak
the old lease's holds until it expires, and two ids for one job would each pin snapshots.
So the id is created once, with a write that is atomic and no-clobber
(:meth:`CheckpointStore.create <tiering.state.checkpoint_store.LocalCheckpoint.create>`): on a
local disk the file is written and fsynced under a temporary name, then *linked* into place; on
S3 it is one conditional put (``If-None-Match: *``). Either fails when the target exists, so of
two drivers racing on a fresh checkpoint exactly one id wins and both return it (a plain replace
would let the loser overwrite the winner's id after the winner had started using it). A file
that exists but does not parse is an error, never a reason to make a new id: it is a
:class:`CheckpointError` naming the file. A write that did not land (a full or failing disk: a
short file, an fsync error) is found before the id is used: the file is read back and must hold
the id written, else a :class:`CheckpointError` names the file and what it holds.

A checkpoint belongs to the job that made its lease id: another job started on it would share
that lease, and each job's epochs would fence the other's calls on it. So a job whose name is not
the one the file names (its ``job``, else the job its id was made for) is refused, a
:class:`ConfigError` naming the owner, before the id is used; an id of another form names no job
and is any job's.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

from tiering.errors import CheckpointError, ConfigError
from tiering.state.checkpoint_store import CheckpointStore, LocalCheckpoint, open_checkpoint

__all__ = [
    "check_owner",
    "checkpoint_dir",
    "job_of_lease",
    "lease_file_path",
    "load_or_create_lease_id",
    "new_lease_id",
    "read_lease_id",
]

_PART = "tiering/lease.json"
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


def lease_file_path(checkpoint: str | CheckpointStore) -> str:
    """``<checkpoint>/tiering/lease.json``: a local path or an ``s3://`` URI."""
    return open_checkpoint(checkpoint).name(_PART)


def checkpoint_dir(checkpoint: str) -> Path:
    """The directory of a local checkpoint (a path or a ``file:`` URI); a CheckpointError for one on S3."""
    store = open_checkpoint(checkpoint)
    if not isinstance(store, LocalCheckpoint):
        raise CheckpointError(f"checkpoint {checkpoint!r} is on S3, not a local directory")
    return store.root


def read_lease_id(checkpoint: str | CheckpointStore) -> str | None:
    """The lease id kept in ``checkpoint``, or None when there is none yet; never creates one
    (for readers such as ``tiering status``)."""
    store = open_checkpoint(checkpoint)
    return _read(store)[0] if store.kind(_PART) is not None else None


def check_owner(checkpoint: str | CheckpointStore, job: str) -> None:
    """Refuse ``job`` on a checkpoint whose lease file names another job (ConfigError naming it);
    a checkpoint with no lease file yet is anyone's."""
    store = open_checkpoint(checkpoint)
    if store.kind(_PART) is not None:
        _owned_by(store, job)


def load_or_create_lease_id(checkpoint: str | CheckpointStore, job: str) -> str:
    """The lease id of this checkpoint: created on first call (``<job>-<uuid4 hex>``), then
    always the same one; refused (ConfigError) when the checkpoint is another job's."""
    lease_id = new_lease_id(job)
    store = open_checkpoint(checkpoint)
    if store.kind(_PART) is not None:
        return _owned_by(store, job)
    data = json.dumps({"lease_id": lease_id, "job": job}).encode()
    try:
        if not store.create(_PART, data):
            return _owned_by(store, job)
    except OSError as e:
        raise CheckpointError(f"lease file {store.name(_PART)}: writing it failed: {e}") from e
    landed, _ = _read(store)
    if landed != lease_id:
        raise CheckpointError(
            f"lease file {store.name(_PART)} holds {landed!r} right after {lease_id!r} was written to it"
        )
    return lease_id


def _owned_by(store: CheckpointStore, job: str) -> str:
    """The checkpoint's lease id, when ``job`` may use it."""
    lease_id, owner = _read(store)
    if owner is not None and owner != job:
        raise ConfigError(
            [
                f"job.checkpoint: {store.name()} belongs to job {owner!r} (its lease file {store.name(_PART)} "
                f"says so), not to job {job!r}: two jobs on one checkpoint share one lease and fence each other; "
                f"give job {job!r} a checkpoint of its own"
            ]
        )
    return lease_id


def _read(store: CheckpointStore) -> tuple[str, str | None]:
    """The file's lease id and the job it names (its ``job``, else its id's; None: neither)."""
    path = store.name(_PART)
    try:
        data = json.loads(store.read_bytes(_PART).decode("utf-8"))
    except (OSError, ValueError) as e:
        raise CheckpointError(
            f"lease file {path} is unreadable or not JSON ({e}); restore it or remove it "
            "knowingly (a new lease id leaves the old lease to expire)"
        ) from None
    lease_id = data.get("lease_id") if isinstance(data, dict) else None
    if not isinstance(lease_id, str) or not lease_id:
        raise CheckpointError(f"lease file {path} has no 'lease_id' string: {data!r}")
    job = data.get("job")
    return lease_id, job if isinstance(job, str) and job else job_of_lease(lease_id)
