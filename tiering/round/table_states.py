"""The steps a table takes through a round, and the typed cause of a table's failure.

Failure mode this prevents: a table's progress kept implicit (a field that doubles as a flag)
and its failure kept as a string, so that a step taken twice (two releases, a commit reported
as failed) or a cause told apart by parsing text goes unnoticed. Each table of a round is in
exactly one :class:`TableState`; the allowed steps are listed here, and a step outside them is
a :class:`~tiering.errors.RoundStateError` (a bug, raised where it happens). A failure is a
:class:`TableFailure`: what failed (:class:`FailureCause`), in which state, and the error.

Spark-free and lake-free on purpose: ``tiering status`` and the health file read these.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tiering.errors import (
    BucketWriteError,
    ForeignCommitError,
    LakeCommitError,
    LakeReadError,
    SchemaMismatchError,
    SnapshotUnavailableError,
    StoreError,
    TableMovedError,
    TableNotFoundError,
    TableRecreatedError,
)

__all__ = ["TableState", "FailureCause", "TableFailure", "NEXT_STATES", "cause_of"]


class TableState(StrEnum):
    """Where a table is in its round. The success path, in order, then the one failure state."""

    #: the round planned splits of the table (the batch's end offset)
    PLANNED = "planned"
    #: the round's snapshots are (re-)acquired under the lease, right before they are read
    ACQUIRED = "acquired"
    #: checked against the lake (replay, fence, schema) and planned per bucket
    PREPARED = "prepared"
    #: every bucket file of the round is written and present
    WRITTEN = "written"
    #: the table's one Delta commit landed (or the lake already had the round: a replay)
    COMMITTED = "committed"
    #: the store knows the lake offsets the commit reached
    REPORTED = "reported"
    #: the table's leased snapshots are let go: the round is over for it
    RELEASED = "released"
    #: the round failed for this table before its commit landed (see :class:`TableFailure`)
    FAILED = "failed"


#: The steps a table may take from each state. A committed table never fails: a store blip after
#: the commit delays its report (COMMITTED -> RELEASED, reported next round), it does not undo it.
NEXT_STATES: dict[TableState, frozenset[TableState]] = {
    TableState.PLANNED: frozenset({TableState.ACQUIRED, TableState.FAILED}),
    TableState.ACQUIRED: frozenset({TableState.PREPARED, TableState.COMMITTED, TableState.FAILED}),
    TableState.PREPARED: frozenset({TableState.WRITTEN, TableState.FAILED}),
    TableState.WRITTEN: frozenset({TableState.COMMITTED, TableState.FAILED}),
    TableState.COMMITTED: frozenset({TableState.REPORTED, TableState.RELEASED}),
    TableState.REPORTED: frozenset({TableState.RELEASED}),
    TableState.RELEASED: frozenset(),
    TableState.FAILED: frozenset(),
}


class FailureCause(StrEnum):
    """What a table's round failed on; what an operator does about it differs per cause."""

    #: the store no longer has the table (dropped upstream, maybe mid-round); its lake table is kept
    DROPPED = "dropped"
    #: the table was dropped and re-created upstream mid-round; the next round bootstraps it
    RECREATED = "recreated"
    #: a snapshot the round was to read was collected before it was read; re-planned from a newer one
    SNAPSHOT_GONE = "snapshot_gone"
    #: the KV table's schema changed in a way the lake cannot follow; needs a person
    SCHEMA = "schema"
    #: reading the table's Delta log from the lake's object store failed
    LAKE_READ = "lake_read"
    #: writing a bucket's data files failed (the object store, the executors)
    FILES = "files"
    #: another writer changed the table's rows in the lake; needs `tiering resync`
    FOREIGN_WRITE = "foreign_write"
    #: the Delta commit failed (conflict, the object store)
    COMMIT = "commit"
    #: the table moved to another member of the job's tiering group; that member tiers it now
    MOVED = "moved"
    #: a call to the KV store failed
    STORE = "store"
    #: anything else: a bug or an unexpected library error
    INTERNAL = "internal"


#: Most specific error class first: subclasses before the classes they refine.
_CAUSES: tuple[tuple[type[Exception], FailureCause], ...] = (
    (TableNotFoundError, FailureCause.DROPPED),
    (TableRecreatedError, FailureCause.RECREATED),
    (SnapshotUnavailableError, FailureCause.SNAPSHOT_GONE),
    (SchemaMismatchError, FailureCause.SCHEMA),
    (LakeReadError, FailureCause.LAKE_READ),
    (BucketWriteError, FailureCause.FILES),
    (ForeignCommitError, FailureCause.FOREIGN_WRITE),
    (LakeCommitError, FailureCause.COMMIT),
    (TableMovedError, FailureCause.MOVED),
    (StoreError, FailureCause.STORE),
)


def cause_of(error: BaseException) -> FailureCause:
    """The cause an error stands for; :attr:`FailureCause.INTERNAL` for any error not listed."""
    return next((cause for kind, cause in _CAUSES if isinstance(error, kind)), FailureCause.INTERNAL)


@dataclass(frozen=True)
class TableFailure:
    """Why a table's round failed: the cause, the state it had reached, and the error."""

    cause: FailureCause
    state: TableState
    error_type: str
    message: str

    @classmethod
    def of(cls, error: BaseException, state: TableState) -> TableFailure:
        return cls(cause_of(error), state, type(error).__name__, str(error))

    def handed_over(self, owned: bool) -> bool:
        """True when this is no failure of the table's: it failed as ``moved`` and the member no
        longer ``owned`` it after the round (its new owner tiers it now). A table failed as moved
        that the member still owns did not move: its rounds are refused, a failure like any other."""
        return self.cause is FailureCause.MOVED and not owned

    def as_dropped(self) -> TableFailure:
        """The same failure, known now to be the table's drop (found by listing the store)."""
        return TableFailure(FailureCause.DROPPED, self.state, self.error_type, self.message)

    def __str__(self) -> str:
        return f"{self.error_type}: {self.message}"
