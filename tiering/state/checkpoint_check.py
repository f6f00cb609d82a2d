"""The streaming checkpoint, local or on S3, checked before the query starts: what is wrong with it, and where.

Failure mode this addresses: Spark meets a damaged checkpoint deep inside the query's start and
says so badly or not at all. An ``offsets`` that is a file is a bare ``java.lang.AssertionError:
assertion failed`` naming no file; a ``commits/N`` without its ``offsets/N`` is reported as a
concurrent update; a read-only or full filesystem is an IOException in the middle of a round.
:func:`check_checkpoint` runs when a term starts, before anything of the term is written to the
checkpoint, and raises :class:`CheckpointError` naming the path, what it found and what it
expected. It never repairs: it reads, and probes each directory by creating, syncing and removing
a small hidden file (how a read-only or full filesystem shows itself; Spark ignores hidden names),
so the checkpoint is left as it was found.

What is checked, for each part that exists (a missing part is created by whoever writes it):

- the root and ``offsets/``, ``commits/``, ``sources/``, ``tiering/``: directories that take a write;
  a missing root: its nearest existing ancestor is a directory it can be created in (on S3: its
  bucket exists and the prefix takes a write);
- ``metadata``: Spark's query id, a JSON object with a string ``id``;
- ``offsets/<batch id>``: Spark's ``OffsetSeqLog`` entries as :mod:`tiering.state.offset_log`
  reads them (an entry of another ``v<n>`` format is Spark's business: the round then reads the
  batch's rows); ``commits/<batch id>``: a version line ``v<n>`` and a JSON object;
- batch ids: each log's ids consecutive, and the commits at most one batch behind the offsets and
  never ahead of them (the only states Spark writes: offsets N, then the batch, then commits N);
- ``tiering/lease.json``: the lease id (:mod:`tiering.state.lease_file`), and, given the job, that it
  names no other job (a ``ConfigError`` naming the owner); ``tiering/tables.json``:
  a readable file (its content is advisory: :mod:`tiering.round.health` starts a new one when it
  does not parse).

Files are checked by reading them; only directories need to take writes, since every file here is
written once under a temporary name and renamed or linked into place, never rewritten.
"""

from __future__ import annotations

import json
import re

from tiering.errors import CheckpointError, OffsetLogFormatError
from tiering.state.checkpoint_store import (
    DIRECTORY as _DIRECTORY,
)
from tiering.state.checkpoint_store import (
    FILE as _FILE,
)
from tiering.state.checkpoint_store import (
    CheckpointStore,
    open_checkpoint,
    reason,
)
from tiering.state.lease_file import check_owner, read_lease_id
from tiering.state.offset_log import read_batch_offset

__all__ = ["check_checkpoint"]

_VERSION_LINE = re.compile(r"v[0-9]+")
#: What to do about a log Spark did not write this way: the lake, not the checkpoint, holds what was tiered.
_LOG_REMEDY = (
    "restore the missing entries, or start from a new checkpoint holding only tiering/lease.json "
    "(rounds are planned from the lake; the lease id is kept)"
)


def check_checkpoint(checkpoint: str | CheckpointStore, job: str | None = None) -> None:
    """Raise :class:`CheckpointError` when the checkpoint at ``checkpoint`` (a local path, a
    ``file:`` URI, or a store: :func:`tiering.state.checkpoint_store.checkpoint_of`) cannot be used
    as it is, a ``ConfigError`` when it is another job's than ``job``; return when the query may
    start from it."""
    store = open_checkpoint(checkpoint)
    if store.kind() is None:
        store.check_creatable()
        return
    _check_directory(store, "", "the checkpoint")
    if store.kind("metadata") is not None:
        _check_metadata(store, "metadata")
    offsets = _batch_ids(store, "offsets", "Spark's offsets log")
    for batch_id in offsets:
        _check_offsets_entry(store, batch_id)
    commits = _batch_ids(store, "commits", "Spark's commit log")
    for batch_id in commits:
        _check_commit_entry(store, f"commits/{batch_id}")
    _check_logs_agree(store, offsets, commits)
    if store.kind("sources") is not None:
        _check_directory(store, "sources", "Spark's source metadata")
    if store.kind("tiering") is not None:
        _check_directory(store, "tiering", "the job's own files")
        if store.kind("tiering/lease.json") is not None:
            _expect(store, "tiering/lease.json", _FILE, "the lease-id file")
            read_lease_id(store)
            if job is not None:
                check_owner(store, job)
        if store.kind("tiering/tables.json") is not None:
            _read(store, "tiering/tables.json", "the table health file")


def _expect(store: CheckpointStore, part: str, expected: str, role: str) -> None:
    found = store.kind(part)
    if found != expected:
        raise CheckpointError(
            f"checkpoint path {store.name(part)} ({role}) is {found or 'missing'}; expected {expected}"
        )


def _check_directory(store: CheckpointStore, part: str, role: str) -> None:
    """A directory that can be listed and written to."""
    _expect(store, part, _DIRECTORY, role)
    try:
        store.listdir(part)
    except OSError as e:
        raise CheckpointError(
            f"checkpoint directory {store.name(part)} ({role}) cannot be listed: {reason(e)}"
        ) from None
    try:
        store.probe(part)
    except OSError as e:
        raise CheckpointError(
            f"checkpoint directory {store.name(part)} ({role}) does not take writes: {reason(e)}; "
            "expected a writable directory with free space"
        ) from None


def _read(store: CheckpointStore, part: str, role: str) -> str:
    _expect(store, part, _FILE, role)
    try:
        return store.read_bytes(part).decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CheckpointError(f"checkpoint file {store.name(part)} ({role}) is unreadable: {reason(e)}") from None


def _check_metadata(store: CheckpointStore, part: str) -> None:
    text = _read(store, part, "Spark's query id")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        raise CheckpointError(
            f"checkpoint file {store.name(part)} (Spark's query id) holds {text[:80]!r}; "
            'expected a JSON object {"id": "<query id>"}'
        )


def _batch_ids(store: CheckpointStore, log: str, role: str) -> list[int]:
    """The batch ids of a log directory, consecutive; [] when the log does not exist yet."""
    if store.kind(log) is None:
        return []
    _check_directory(store, log, role)
    ids = sorted(int(name) for name in store.listdir(log) if name.isascii() and name.isdigit())
    missing = sorted(set(range(ids[0], ids[-1] + 1)) - set(ids)) if ids else []
    if missing:
        raise CheckpointError(
            f"checkpoint log {store.name(log)} ({role}) has batches {ids[0]}..{ids[-1]} without {_listed(missing)}; "
            f"expected consecutive batch ids: {_LOG_REMEDY}"
        )
    return ids


def _check_offsets_entry(store: CheckpointStore, batch_id: int) -> None:
    part = f"offsets/{batch_id}"
    _expect(store, part, _FILE, f"the planned end offset of batch {batch_id}")
    try:
        read_batch_offset(store, batch_id)
    except OffsetLogFormatError as e:
        if not _VERSION_LINE.fullmatch(e.version):
            raise CheckpointError(
                f"offsets log entry {store.name(part)} starts {e.version!r}; expected a version line "
                "'v<n>' as Spark writes"
            ) from None


def _check_commit_entry(store: CheckpointStore, part: str) -> None:
    lines = _read(store, part, "the commit of a batch").splitlines()
    if len(lines) != 2 or not _VERSION_LINE.fullmatch(lines[0]) or not _is_json_object(lines[1]):
        raise CheckpointError(
            f"commit log entry {store.name(part)} holds {[line[:60] for line in lines[:3]]!r}; "
            "expected a version line 'v<n>' and one JSON object, as Spark writes"
        )


def _check_logs_agree(store: CheckpointStore, offsets: list[int], commits: list[int]) -> None:
    """Spark writes ``offsets/N``, runs batch N, then writes ``commits/N``: the last commit is the
    last planned batch or the one before it."""
    if not commits:
        return
    root = store.name()
    last_commit = commits[-1]
    last_planned = offsets[-1] if offsets else None
    if last_planned is None or last_commit > last_planned:
        orphans = [b for b in commits if last_planned is None or b > last_planned]
        raise CheckpointError(
            f"checkpoint {root}: commits/{_listed(orphans)} without a planned batch in offsets/ "
            f"(last planned: {last_planned}); expected every committed batch planned first: "
            f"remove the orphan commit {'entry' if len(orphans) == 1 else 'entries'} from {store.name('commits')} "
            "(the lake, not the checkpoint, holds what was tiered)"
        )
    if last_commit < last_planned - 1:
        raise CheckpointError(
            f"checkpoint {root}: batches {last_commit + 1}..{last_planned} are planned in offsets/ but only "
            f"{last_commit} committed; expected at most the last planned batch uncommitted: remove "
            f"offsets/{_listed(list(range(last_commit + 2, last_planned + 1)))} from {store.name('offsets')} "
            "(the lake, not the checkpoint, holds what was tiered)"
        )


def _listed(ids: list[int]) -> str:
    """``3``, ``{3..5}`` or ``{3,7}``."""
    if len(ids) == 1:
        return str(ids[0])
    if ids == list(range(ids[0], ids[-1] + 1)):
        return f"{{{ids[0]}..{ids[-1]}}}"
    return "{" + ",".join(map(str, ids)) + "}"


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False
