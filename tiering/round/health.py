"""Each table's recent health, kept in the streaming checkpoint: last commit, last failure, dropped.

Failure mode this addresses: a table that fails every round for days while the job looks
alive. The lake only records what landed, and the driver's log rolls away, so ``tiering
status`` could not say why a table is stuck, since when, or that it was dropped upstream.
The leader therefore rewrites ``<checkpoint>/tiering/tables.json`` after every round with,
per table, its last commit, its last failure (cause, step, message, time, how many rounds in a
row) and when it was found dropped. The file is replaced atomically (write, fsync, rename on a
local disk; one PUT on S3: :mod:`tiering.state.checkpoint_store`): a reader sees the previous
round's file or this one's, never half of one. It is advisory: a lost or
unreadable file loses history, never data, so the job starts a fresh one instead of stopping.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, RootModel, ValidationError

from tiering.round.table_states import FailureCause, TableFailure, TableState
from tiering.state.checkpoint_store import CheckpointStore, open_checkpoint

__all__ = ["TableHealth", "RoundFacts", "health_file_path", "read_health", "write_health", "after_round"]

log = logging.getLogger(__name__)

_PART = "tiering/tables.json"


class TableHealth(BaseModel):
    """One table as the job last saw it. Times are epoch milliseconds."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    table: str
    table_id: int | None = None
    last_commit_version: int | None = None
    last_commit_ms: int | None = None
    last_failure: str | None = None
    #: what the last failure failed on, and the step the table had reached (typed, not parsed)
    last_failure_cause: FailureCause | None = None
    last_failure_state: TableState | None = None
    last_failure_ms: int | None = None
    consecutive_failures: int = 0
    dropped_ms: int | None = None

    @property
    def dropped(self) -> bool:
        return self.dropped_ms is not None


class _HealthFile(RootModel[dict[str, TableHealth]]):
    pass


@dataclass(frozen=True)
class RoundFacts:
    """What one round did to each table, in the terms the health file keeps."""

    now_ms: int
    committed: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # table -> (table_id, delta_version)
    failed: Mapping[str, tuple[int, TableFailure]] = field(default_factory=dict)  # table -> (table_id, failure)
    dropped: frozenset[str] = frozenset()  # tables the store no longer has, failed or committed
    #: in a tiering group, the tables this member owns after the round (None outside a group)
    owned: frozenset[str] | None = None


def health_file_path(checkpoint: str | CheckpointStore) -> str:
    """``<checkpoint>/tiering/tables.json``: a local path or an ``s3://`` URI."""
    return open_checkpoint(checkpoint).name(_PART)


def read_health(checkpoint: str | CheckpointStore) -> dict[str, TableHealth]:
    """The file's tables; empty when there is none yet or it cannot be read (logged: history is
    lost, nothing else)."""
    store = open_checkpoint(checkpoint)
    try:
        return _HealthFile.model_validate_json(store.read_bytes(_PART)).root
    except FileNotFoundError:
        return {}
    except (OSError, ValidationError) as e:
        log.warning("table health file %s is unreadable (%s); starting a new one", store.name(_PART), e)
        return {}


def write_health(checkpoint: str | CheckpointStore, health: Mapping[str, TableHealth]) -> None:
    """Replace the file atomically (a reader never sees half of it)."""
    data = _HealthFile(dict(sorted(health.items()))).model_dump_json(indent=1).encode()
    open_checkpoint(checkpoint).replace(_PART, data)


def after_round(health: Mapping[str, TableHealth], facts: RoundFacts) -> dict[str, TableHealth]:
    """``health`` updated with one round: a commit clears the failure streak, a failure extends
    it; a table is marked dropped while the store lacks it (the mark goes when the name is back);
    tables the round did not touch keep theirs. In a tiering group a table that moved to another
    member is no failure, and only the owned tables keep a record: the new owner's file tells the
    table's health, and a record kept here would show it stale (or failing) in ``tiering status``.
    A table the round failed as moved that this member still owns did not move: its rounds are
    refused (a fence or a store that disagrees with the ownership), so it is a failure like any
    other, and one that stays so is seen by ``tiering status --fail-after`` and the alerts."""
    out = dict(health)

    def incarnation(table: str, table_id: int) -> TableHealth:
        """The table's record if it is of this ``table_id``; a re-created table starts a new one."""
        old = out.get(table)
        return old if old is not None and old.table_id == table_id else TableHealth(table=table, table_id=table_id)

    def dropped_ms(old: TableHealth, table: str) -> int | None:
        return (old.dropped_ms or facts.now_ms) if table in facts.dropped else None

    for table, (table_id, version) in facts.committed.items():
        old = incarnation(table, table_id)
        out[table] = old.model_copy(
            update={
                "last_commit_version": version,
                "last_commit_ms": facts.now_ms,
                "consecutive_failures": 0,
                "dropped_ms": dropped_ms(old, table),
            }
        )
    for table, (table_id, failure) in facts.failed.items():
        if failure.handed_over(facts.owned is not None and table in facts.owned):
            continue
        old = incarnation(table, table_id)
        out[table] = old.model_copy(
            update={
                "last_failure": str(failure),
                "last_failure_cause": failure.cause,
                "last_failure_state": failure.state,
                "last_failure_ms": facts.now_ms,
                "consecutive_failures": old.consecutive_failures + 1,
                "dropped_ms": dropped_ms(old, table),
            }
        )
    if facts.owned is not None:
        return {table: record for table, record in out.items() if table in facts.owned}
    return out
