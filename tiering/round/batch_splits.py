"""The splits of a round's micro-batch, read the cheap way only when that way is safe.

Failure mode: the round committer must commit exactly the splits the source planned, never a
guess. The cheap way to get them is the batch's end offset in Spark's offsets log (a file read,
no Spark job: :mod:`tiering.state.offset_log`), but that file is Spark's internal format, and a
Spark upgrade that changed it would break every round, silently if it still parsed. So the log
is read only when its format is the one this code knows; otherwise the splits come from the
batch's own rows, the descriptors the source emitted for that same offset
(:mod:`tiering.enumerator.descriptor`), at the cost of a Spark job a round, and one WARNING a
round names the file and its format version. A log of the known format that does not decode is
corruption: its :class:`CheckpointError` propagates, it is not read around.

Both ways give the same value: the round id and its splits in :func:`sort_key` order.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from tiering.enumerator.descriptor import from_descriptor
from tiering.enumerator.splits import Split, sort_key
from tiering.errors import OffsetLogFormatError, TieringError
from tiering.state.checkpoint_store import CheckpointStore
from tiering.state.offset_log import read_batch_offset

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["BatchSplits", "batch_splits"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchSplits:
    """One micro-batch's round: its id, its splits (sorted) and where they were read from."""

    round_id: int
    splits: tuple[Split, ...]
    source: Literal["offsets log", "batch rows"]


def batch_splits(batch_df: DataFrame, batch_id: int, checkpoint: str | CheckpointStore) -> BatchSplits:
    """The round of batch ``batch_id`` (``batch_df`` as ``foreachBatch`` hands it over) of the
    query checkpointed at ``checkpoint``: from the offsets log when its format is known, else
    from the batch's rows."""
    try:
        offset = read_batch_offset(checkpoint, batch_id)
    except OffsetLogFormatError as e:
        log.warning(
            "offsets log entry %s is format %r, which this code does not read: batch %d's splits "
            "are read from its rows (a Spark job a round)",
            e.path,
            e.version,
            batch_id,
        )
        return _from_rows(batch_df, batch_id)
    return BatchSplits(offset.round, tuple(sorted(offset.splits, key=sort_key)), "offsets log")


def _from_rows(batch_df: DataFrame, batch_id: int) -> BatchSplits:
    decoded = [from_descriptor(row) for row in batch_df.collect()]
    rounds = {round_id for _, round_id in decoded}
    if len(rounds) != 1:
        raise TieringError(f"batch {batch_id}: its split descriptors must name one round, got {sorted(rounds)}")
    return BatchSplits(rounds.pop(), tuple(sorted((split for split, _ in decoded), key=sort_key)), "batch rows")
