"""A group member's tables, as its leader last took them: table -> table epoch.

Failure mode it prevents: a member's planner planning a table its leader no longer owns, or one
whose epoch was never persisted. The leader's session is the member's (its ephemeral node is the
membership, coord/group.py) and it alone bumps table epochs; Spark runs the source's planning in a
Python process of its own on the same host, which reads what the leader decided from a local file
written whole, synced and renamed into place (tiering/atomic_file.py: a reader never sees half of
it). A table absent from it is not planned, and a table's epoch here is the one every lease call,
report and commit of its rounds carries.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tiering.atomic_file import replace_file
from tiering.epochs import TableEpoch
from tiering.errors import CoordinationError

__all__ = ["OwnedTables"]


@dataclass(frozen=True)
class OwnedTables:
    """The tables ``job`` owns in ``group``, each with the table epoch it got (the leader's
    decision as the member's file holds it; :mod:`tiering.coord.write_authority` answers from it)."""

    group: str
    job: str
    tables: Mapping[str, TableEpoch] = field(default_factory=dict)

    def epoch(self, table: str) -> TableEpoch | None:
        """The table's epoch while this member owns it, else None."""
        return self.tables.get(table)

    def write(self, path: Path) -> None:
        """Replace the file at ``path`` with these tables, atomically."""
        text = json.dumps({"group": self.group, "job": self.job, "tables": dict(self.tables)}, sort_keys=True)
        replace_file(path, text.encode("utf-8"))

    @classmethod
    def read(cls, path: Path, group: str, job: str) -> OwnedTables:
        """The tables last written at ``path``; none owned before the first write."""
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls(group, job)
        except (OSError, ValueError) as e:
            raise CoordinationError(f"cannot read the group ownership file {path}: {e}") from e
        if record.get("group") != group or record.get("job") != job:
            raise CoordinationError(
                f"group ownership file {path} is job {record.get('job')!r}'s of group {record.get('group')!r}, "
                f"not job {job!r}'s of group {group!r}"
            )
        return cls(group, job, {str(t): TableEpoch(int(e)) for t, e in record["tables"].items()})
