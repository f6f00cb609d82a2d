"""A batch's end offset, read back from the query's offsets log (Spark's write-ahead log).

Why: the round committer needs the round's splits, which the source checkpointed as the batch's
end offset. Spark writes ``<checkpoint>/offsets/<batch id>`` before it runs the batch, replays
the same file after a crash, and the source's ``partitions(start, end)`` derives its rows from
exactly that offset. Reading the file costs a millisecond; reading the descriptor rows through
Spark costs a job (about 200 ms a round on a warm driver: 40% of a round that changed one row).

Failure mode: a file of another format (another Spark version) or no file for the batch. That is
a :class:`CheckpointError` naming the file: never a guess, never an empty round.

The file is Spark's ``OffsetSeqLog`` entry: a version line (``v1``), a JSON line of batch
metadata, then one line per source — this query has one, the kv-tiering source's JSON offset.
"""

from __future__ import annotations

from tiering.errors import CheckpointError
from tiering.state.lease_file import checkpoint_dir
from tiering.state.offset import TieringOffset

__all__ = ["read_batch_offset"]

_VERSION = "v1"


def read_batch_offset(checkpoint: str, batch_id: int) -> TieringOffset:
    """The end offset Spark logged for ``batch_id`` of the query checkpointed at ``checkpoint``."""
    path = checkpoint_dir(checkpoint) / "offsets" / str(batch_id)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise CheckpointError(f"offsets log entry {path} of batch {batch_id} is unreadable: {e}") from None
    if len(lines) != 3 or lines[0] != _VERSION:
        raise CheckpointError(f"offsets log entry {path}: expected '{_VERSION}', batch metadata and one source "
                              f"offset, got {len(lines)} lines starting {lines[:1]!r}")
    try:
        return TieringOffset.from_json(lines[2])
    except ValueError as e:
        raise CheckpointError(f"offsets log entry {path}: the source offset does not decode: {e}") from None
