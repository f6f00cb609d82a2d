"""The tiering entry of a Delta commit: the offsets a round reached, and who wrote it.

Failure mode this guards against: planning a round from anything but the lake. The
checkpoint can be behind (a crash after the commit) or ahead (a failed table) of the lake;
the per-bucket offsets written *in the same atomic commit* as the data are the only truth
(docs/DESIGN.md §4). Every round commit carries them cumulatively for the whole table, so the newest
tiering commit alone is enough. Commits by other tools (OPTIMIZE, VACUUM) carry none and are
walked past. Both writers encode the entry here and every reader decodes it here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from deltalake import DeltaTable

from tiering.delta_log.layout import MAINTENANCE_KEY, METADATA_KEY, METADATA_VERSION, fence_property, txn_version
from tiering.delta_log.log_entries import read_entry
from tiering.enumerator.positions import LakePosition
from tiering.errors import LakeCommitError
from tiering.objectstore.object_store import ObjectStore

__all__ = [
    "LakeCommitInfo",
    "commit_metadata",
    "maintenance_metadata",
    "round_commit_info",
    "find_round_commit",
    "round_commit_at",
    "fence_epoch",
    "newest_commit",
    "tiering_entry",
]

_RECENT_COMMITS = 20  # first look at this many commits; only then walk the whole history


@dataclass(frozen=True)
class LakeCommitInfo:
    """The newest tiering commit of a table: its position and who wrote it.

    ``snapshots`` maps the buckets bootstrapped *in that commit* to their snapshot ids.
    """

    position: LakePosition
    delta_version: int
    job: str
    epoch: int
    round_id: int
    lease_id: str
    snapshots: Mapping[int, int] = field(default_factory=dict, hash=False)
    committed_ms: int | None = field(default=None, compare=False)  # the Delta commit's timestamp
    #: the column the writer keeps each bucket's files sorted by (the first key column; None:
    #: a writer that did not say), for compaction to keep them so
    sort_key: str | None = None


def commit_metadata(
    *,
    job: str,
    position: LakePosition,
    epoch: int,
    round_id: int,
    lease_id: str,
    snapshots: Mapping[int, int],
    sort_key: str | None = None,
) -> dict[str, Any]:
    """The custom commit info entry of a round commit (JSON; bucket keys are strings)."""
    entry = {
        "v": METADATA_VERSION,
        "job": job,
        "table_id": position.table_id,
        "epoch": epoch,
        "round": round_id,
        "lease_id": lease_id,
        "buckets": {str(b): o for b, o in sorted(position.buckets.items())},
        "snapshots": {str(b): s for b, s in sorted(snapshots.items())},
    }
    if sort_key is not None:
        entry["sort_key"] = sort_key
    return {METADATA_KEY: entry}


def maintenance_metadata(*, job: str, epoch: int, operation: str) -> dict[str, Any]:
    """The custom commit info entry of a maintenance commit. Under its own key, so the readers of
    round entries walk past it: it changes no row and moves no offset."""
    return {MAINTENANCE_KEY: {"v": METADATA_VERSION, "job": job, "epoch": epoch, "operation": operation}}


def fence_epoch(dt: DeltaTable, writer: str) -> int | None:
    """``writer``'s fence on the table (its table property), if any: no commit of ``writer`` under
    an older epoch may land on top of it. Another writer's fence is in that writer's epochs, not
    these: it fences nothing of ``writer``'s."""
    fence = dt.metadata().configuration.get(fence_property(writer))
    return int(fence) if fence else None


def newest_commit(dt: DeltaTable, table: str, newer_than: int | None = None) -> LakeCommitInfo | None:
    """The newest tiering commit at or below the loaded version of ``dt``; None when the table
    holds none (with ``newer_than``: none among the versions above it)."""
    if newer_than is not None:
        return next(
            (
                _decode(e, c, table)
                for c in dt.history(dt.version() - newer_than)
                if (e := tiering_entry(c)) is not None
            ),
            None,
        )
    for limit in (_RECENT_COMMITS, None):
        history = dt.history(limit)
        for commit in history:
            entry = tiering_entry(commit)
            if entry is not None:
                return _decode(entry, commit, table)
        if limit is not None and len(history) < limit:
            return None
    return None


def find_round_commit(dt: DeltaTable, job: str, txn: int, depth: int = 50) -> dict[str, Any] | None:
    """The commit info of ``job``'s round whose txn version is ``txn``, among the newest
    ``depth`` commits: writers do not return the version they committed, and another commit
    may already sit on top of it (the newest is looked at alone first: it almost always is ours)."""
    for limit in (1, depth):
        for commit in dt.history(limit):
            if _is_round(commit, job, txn):
                return commit
    return None


def round_commit_at(store: ObjectStore, table_uri: str, version: int, job: str, txn: int) -> dict[str, Any] | None:
    """The commit info (with its ``version``, as the history gives it) of ``job``'s round
    ``txn`` when it is Delta version ``version``; None when that version is another commit or
    not there. One GET: the version right after the one a commit started from is almost always
    the commit's own, and the history would list the log first."""
    try:
        actions = read_entry(store, table_uri, version)
    except FileNotFoundError:
        return None
    info = next((a["commitInfo"] for a in actions if isinstance(a.get("commitInfo"), dict)), None)
    return {**info, "version": version} if info is not None and _is_round(info, job, txn) else None


def _is_round(commit: Mapping[str, Any], job: str, txn: int) -> bool:
    entry = tiering_entry(commit)
    return isinstance(entry, dict) and entry.get("job") == job and txn_version(entry["epoch"], entry["round"]) == txn


def round_commit_info(metadata: Mapping[str, Any], delta_version: int, table: str) -> LakeCommitInfo:
    """The :class:`LakeCommitInfo` of a round commit this process just made with ``metadata``
    (:func:`commit_metadata`'s entry) at ``delta_version``, decoded as a reader of the log would
    (its commit timestamp unknown: None)."""
    return _decode(metadata[METADATA_KEY], {"version": delta_version}, table)


def tiering_entry(commit: Mapping[str, Any]) -> Any | None:
    """The tiering entry of one commit info, from either writer: a top-level ``kvTiering``
    field (delta-rs custom metadata) or the ``kvTiering`` key of the JSON in ``userMetadata``
    (delta-spark can set only that string). Other tools' userMetadata is free text: ignored."""
    entry = commit.get(METADATA_KEY)
    if entry is not None:
        return entry
    user = commit.get("userMetadata")
    if not isinstance(user, str) or METADATA_KEY not in user:
        return None
    try:
        parsed = json.loads(user)
    except ValueError:
        return None
    return parsed.get(METADATA_KEY) if isinstance(parsed, dict) else None


def _decode(entry: Any, commit: Mapping[str, Any], table: str) -> LakeCommitInfo:
    version: Any = commit.get("version")
    if isinstance(entry, str):  # a writer that stored the entry as a JSON string
        entry = json.loads(entry)
    try:
        if entry["v"] > METADATA_VERSION:
            raise ValueError(f"metadata version {entry['v']} is newer than this reader ({METADATA_VERSION})")
        position = LakePosition.from_wire(int(entry["table_id"]), {k: int(v) for k, v in entry["buckets"].items()})
        return LakeCommitInfo(
            position=position,
            delta_version=int(version),
            job=str(entry["job"]),
            epoch=int(entry["epoch"]),
            round_id=int(entry["round"]),
            lease_id=str(entry["lease_id"]),
            snapshots={int(b): int(s) for b, s in entry.get("snapshots", {}).items()},
            committed_ms=commit.get("timestamp"),
            sort_key=entry.get("sort_key"),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise LakeCommitError(
            f"table {table!r}: Delta commit {version} has unreadable {METADATA_KEY!r} metadata: {e!r}",
            table=table,
        ) from e
