"""What one round did, typed: the value the job, the metrics, the demo and the health file read.

Failure mode this prevents: consumers telling outcomes apart by parsing strings (a failure's
text, "dropped" worked out again from a listing). Each table of the round ends in exactly one of
:attr:`RoundOutcome.committed` (its commit, or the lake already had the round) and
:attr:`RoundOutcome.failed` (a :class:`~tiering.round.table_states.TableFailure` with its cause).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tiering.round.health import TableHealth
from tiering.round.table_states import TableFailure
from tiering.writers.round_writer import TableCommit

__all__ = ["RoundOutcome"]


@dataclass
class RoundOutcome:
    """What one round did, for logs, metrics, the health file and the availableNow exit code."""

    round_id: int
    epoch: int
    committed: dict[str, TableCommit] = field(default_factory=dict)
    failed: dict[str, TableFailure] = field(default_factory=dict)
    #: changelog records the store holds beyond the lake, per committed table, after the round
    #: (absent when the store could not say: the lag is not worth failing a landed commit for)
    lag: dict[str, int] = field(default_factory=dict)
    #: every table of the round -> the ``table_id`` it was planned for
    table_ids: dict[str, int] = field(default_factory=dict)
    #: committed tables whose lake report the store refused: sent again next round
    unreported: set[str] = field(default_factory=set)
    #: tables the store no longer has: failed ones (cause ``dropped``) and committed ones whose
    #: report found the table gone (dropped upstream after their commit landed)
    dropped: set[str] = field(default_factory=set)
    #: every table's health after this round (filled in by the job, which keeps it)
    health: Mapping[str, TableHealth] = field(default_factory=dict)
