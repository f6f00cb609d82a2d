"""One table's share of a round, moving through the explicit steps of :mod:`tiering.round.table_states`.

Failure mode this prevents: one table's progress inferred from which fields happen to be set,
so that a failure after the commit marks a landed table as failed, or its leased buckets are
released twice. :meth:`TableRound.advance` refuses a step its state does not allow; what a
step produced (the prepared round, the written files, the commit) is kept with the state it
belongs to; :attr:`TableRound.released` says whether its snapshots still wait for their one
release.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tiering.delta_log.lake import LakeTable
from tiering.enumerator.positions import LakePosition
from tiering.enumerator.splits import SnapshotSplit, Split
from tiering.errors import RoundStateError
from tiering.round.table_states import NEXT_STATES, TableFailure, TableState
from tiering.writers.round_writer import PreparedRound, TableCommit, WrittenRound

__all__ = ["TableRound"]


@dataclass
class TableRound:
    """A table's splits of the round, its state, and what each step produced."""

    name: str
    splits: Sequence[Split]
    state: TableState = TableState.PLANNED
    #: the table as the lake holds it, read once for the round (None: no Delta table yet)
    lake: LakeTable | None = None
    #: the splits the lake still lacks (a replay's are already there)
    todo: Sequence[Split] = ()
    written: WrittenRound = field(default_factory=WrittenRound)
    failure: TableFailure | None = None
    #: its leased buckets were let go (or handed on to the next round's retry): never twice
    released: bool = False
    _prepared: PreparedRound | None = None
    _commit: TableCommit | None = None

    @property
    def prepared(self) -> PreparedRound:
        """What its prepare step produced; asked for before that step, a :class:`RoundStateError`."""
        if self._prepared is None:
            raise RoundStateError(f"table {self.name!r} has no prepared round in state {self.state}", table=self.name)
        return self._prepared

    @property
    def commit(self) -> TableCommit:
        """Its commit (or the replayed one the lake had); asked for before, a :class:`RoundStateError`."""
        if self._commit is None:
            raise RoundStateError(f"table {self.name!r} has no commit in state {self.state}", table=self.name)
        return self._commit

    @property
    def table_id(self) -> int:
        return self.splits[0].table_id

    @property
    def position(self) -> LakePosition | None:
        """Where the lake stood for the table when the round read it."""
        return self.lake.position() if self.lake is not None else None

    @property
    def leased(self) -> list[int]:
        """The buckets whose snapshot the lease holds for this round."""
        return sorted({s.bucket for s in self.splits if isinstance(s, SnapshotSplit)})

    def advance(self, to: TableState) -> None:
        if to not in NEXT_STATES[self.state]:
            raise RoundStateError(f"table {self.name!r}: no step from {self.state} to {to} in a round", table=self.name)
        self.state = to

    def prepared_as(self, prepared: PreparedRound) -> None:
        self.advance(TableState.PREPARED)
        self._prepared = prepared

    def written_as(self, written: WrittenRound) -> None:
        self.advance(TableState.WRITTEN)
        self.written = written

    def committed_as(self, commit: TableCommit) -> None:
        self.advance(TableState.COMMITTED)
        self._commit = commit

    def fail(self, error: BaseException) -> TableFailure:
        """Record ``error`` as the table's failure in its current state (a committed table
        cannot fail: :class:`RoundStateError`)."""
        failure = TableFailure.of(error, self.state)
        self.advance(TableState.FAILED)
        self.failure = failure
        return failure
