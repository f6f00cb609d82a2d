"""Whether this term may write a table, and under which epoch: one answer, asked by the source, the
round's committer and the context alike.

Failure mode it prevents: a table written under the wrong epoch, or by a member of a tiering group
that no longer owns it. Two implementations of one Protocol:

- :class:`SoloAuthority`: a job alone writes every table it selects, each commit under the term's job
  epoch (the one ZooKeeper granted the term); a newer term's commit is the writer's to refuse
  (:class:`~tiering.errors.NotLeaderError`), so nothing here ever says a table moved;
- :class:`MemberAuthority`: a member writes only the tables its leader took for it (the member's file,
  :mod:`tiering.coord.ownership`, as read when the authority was made: once per round), each under
  its table epoch. A table that moved is refused before anything of it lands: not in the file, a
  Delta commit of a newer table epoch, a lake commit fenced for it, or the file re-read after a
  failure giving it a new epoch; its new owner tiers it.

The two epochs are distinct types (:mod:`tiering.epochs`): a lake commit carries one or the other
(:data:`CommitEpoch`), and the type says which.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from tiering.epochs import JobEpoch, TableEpoch
from tiering.errors import FencedEpochError, TableMovedError, one_line
from tiering.kvstore.contract import TableClaims

__all__ = [
    "CommitEpoch",
    "WriteAuthority",
    "SoloAuthority",
    "MemberAuthority",
]

#: What a table's lake commit is fenced with: the job epoch alone, or in a group the table's epoch.
CommitEpoch = JobEpoch | TableEpoch


class WriteAuthority(Protocol):
    """This term's answer to "may it write table T, and under which epoch"."""

    @property
    def group(self) -> str | None:
        """The tiering group the term writes for; None for a job alone."""

    @property
    def hands_over(self) -> bool:
        """Whether a table's writer changes between terms' members: then a member's first round of
        a table raises the table's fence to its epoch before reading the lake."""

    def may_write(self, table: str) -> bool:
        """Whether the term writes ``table`` at all (a group member: only the tables it owns)."""

    def check(self, table: str) -> None:
        """Raise :class:`TableMovedError` naming the group when the term may not write ``table``."""

    def table_epoch(self, table: str) -> TableEpoch | None:
        """``table``'s epoch in the group while this member owns it; None outside a group."""

    def commit_epoch(self, table: str, newest_in_lake: int | None) -> CommitEpoch:
        """The epoch ``table``'s lake commit carries; ``newest_in_lake``: the epoch of the lake's
        newest round commit of this writer, which a newer table epoch there says the table moved
        (:class:`TableMovedError`)."""

    def claims(self, tables: Mapping[int, str]) -> TableClaims | None:
        """The claim a lease acquire of ``tables`` (table_id -> name) carries (the store refuses it
        when one of them moved to another member); None: no claim."""

    def fenced(self, table: str, error: FencedEpochError) -> TableMovedError | None:
        """What a fenced write of ``table`` means: the table moved, or (None) the term is over."""

    def moved_meanwhile(self, table: str, error: Exception) -> Exception:
        """``error``, or a :class:`TableMovedError` when ``table`` changed hands since the
        authority was made: whatever the table failed on, its new owner tiers it now."""


@dataclass(frozen=True)
class SoloAuthority:
    """A job alone: it writes every table it selects, under its job epoch."""

    job: str
    epoch: JobEpoch
    group: None = None
    hands_over: bool = False

    def may_write(self, table: str) -> bool:
        return True

    def check(self, table: str) -> None:
        pass

    def table_epoch(self, table: str) -> TableEpoch | None:
        return None

    def commit_epoch(self, table: str, newest_in_lake: int | None) -> CommitEpoch:
        return self.epoch

    def claims(self, tables: Mapping[int, str]) -> TableClaims | None:
        return None

    def fenced(self, table: str, error: FencedEpochError) -> TableMovedError | None:
        return None

    def moved_meanwhile(self, table: str, error: Exception) -> Exception:
        return error


@dataclass(frozen=True)
class MemberAuthority:
    """A member of tiering group ``group``: it writes the tables of ``tables`` (name -> its table
    epoch, as the member's file held them when this was made), each under its table epoch;
    ``now`` reads the file again."""

    group: str
    job: str
    tables: Mapping[str, TableEpoch]
    now: Callable[[], Mapping[str, TableEpoch]] = field(compare=False)
    hands_over: bool = True

    def may_write(self, table: str) -> bool:
        return table in self.tables

    def check(self, table: str) -> None:
        if table not in self.tables:
            raise TableMovedError(
                f"table {table!r} is no longer owned by job {self.job!r} in group {self.group!r}: another member "
                "tiers it",
                table=table,
            )

    def table_epoch(self, table: str) -> TableEpoch | None:
        return self.tables.get(table)

    def commit_epoch(self, table: str, newest_in_lake: int | None) -> CommitEpoch:
        epoch = self.tables.get(table)
        if epoch is None or (newest_in_lake is not None and newest_in_lake > epoch):
            raise TableMovedError(
                f"table {table!r} moved: job {self.job!r} holds table epoch {epoch}, the lake has a commit of table "
                f"epoch {newest_in_lake}",
                table=table,
            )
        return epoch

    def claims(self, tables: Mapping[int, str]) -> TableClaims | None:
        """The owned ones' table epochs, so that the store refuses the acquire when one of them
        moved; None when the member owns none of ``tables``."""
        epochs = {i: e for i, t in sorted(tables.items()) if (e := self.tables.get(t))}
        return TableClaims(self.group, self.job, epochs) if epochs else None

    def fenced(self, table: str, error: FencedEpochError) -> TableMovedError | None:
        """In a group a table's Delta commits carry its table epoch: a newer one moved the table
        (a fence naming another table, or none, is the term's)."""
        if error.table != table:
            return None
        return TableMovedError(f"{error} (the table moved to another member)", table=table)

    def moved_meanwhile(self, table: str, error: Exception) -> Exception:
        epoch = self.tables.get(table)
        if epoch is None or self.now().get(table) == epoch:
            return error
        return TableMovedError(f"{one_line(error)} (the table moved to another member meanwhile)", table=table)
