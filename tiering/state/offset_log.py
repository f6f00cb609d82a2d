"""A batch's end offset, read back from the query's offsets log (Spark's write-ahead log).

Why: the round committer needs the round's splits, which the source checkpointed as the batch's
end offset. Spark writes ``<checkpoint>/offsets/<batch id>`` before it runs the batch, replays
the same file after a crash, and the source's ``partitions(start, end)`` derives its rows from
exactly that offset. Reading the file costs a millisecond; reading the descriptor rows through
Spark costs a job (about 200 ms a round on a warm driver: 40% of a round that changed one row).

Failure modes: the file is Spark's internal format, and another Spark version may write another
one. An entry whose version line is not the one this code knows is an
:class:`OffsetLogFormatError` naming the file and the version found, and the round's splits come
from the batch's rows instead (:mod:`tiering.round.batch_splits`). An entry of the known format
that does not hold what that format says (other lines, a source offset that does not decode),
or no file for the batch, is corruption: a :class:`CheckpointError` naming the file, never a
guess, never an empty round.

The known format is Spark's ``OffsetSeqLog`` entry: a version line (``v1``), a JSON object of
batch metadata, then one line per source — this query has one, the kv-tiering source's JSON
offset.
"""

from __future__ import annotations

import json

from tiering.errors import CheckpointError, OffsetLogFormatError
from tiering.state.checkpoint_store import CheckpointStore, open_checkpoint
from tiering.state.offset import TieringOffset

__all__ = ["newest_batch", "newest_offset", "read_batch_offset", "replayed_offset"]

_VERSION = "v1"


def read_batch_offset(checkpoint: str | CheckpointStore, batch_id: int) -> TieringOffset:
    """The end offset Spark logged for ``batch_id`` of the query checkpointed at ``checkpoint``."""
    store = open_checkpoint(checkpoint)
    path = store.name(f"offsets/{batch_id}")
    try:
        lines = store.read_bytes(f"offsets/{batch_id}").decode("utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise CheckpointError(f"offsets log entry {path} of batch {batch_id} is unreadable: {e}") from None
    if not lines:
        raise CheckpointError(f"offsets log entry {path} of batch {batch_id} is empty")
    if lines[0] != _VERSION:
        raise OffsetLogFormatError(
            f"offsets log entry {path} is format {lines[0][:40]!r}; this code reads '{_VERSION}'",
            path=path,
            version=lines[0][:40],
        )
    if len(lines) != 3 or not _is_json_object(lines[1]):
        raise CheckpointError(
            f"offsets log entry {path}: expected '{_VERSION}', a JSON object of batch metadata "
            f"and one source offset, got {len(lines)} lines starting {[line[:60] for line in lines[:2]]!r}"
        )
    try:
        return TieringOffset.from_json(lines[2])
    except ValueError as e:
        raise CheckpointError(f"offsets log entry {path}: the source offset does not decode: {e}") from None


def newest_batch(checkpoint: str | CheckpointStore, log: str = "offsets") -> int | None:
    """The newest batch id in Spark's ``offsets`` (or ``commits``) log; None when it has none."""
    store = open_checkpoint(checkpoint)
    batches = [int(name) for name in store.listdir(log) if name.isascii() and name.isdigit()]
    return max(batches, default=None)


def newest_offset(checkpoint: str | CheckpointStore) -> TieringOffset | None:
    """The end offset of the newest batch in the offsets log (Spark writes it before the batch
    runs, so it is the next batch's start); None when the log holds none."""
    checkpoint = open_checkpoint(checkpoint)
    newest = newest_batch(checkpoint)
    return None if newest is None else read_batch_offset(checkpoint, newest)


def replayed_offset(checkpoint: str | CheckpointStore) -> TieringOffset | None:
    """The end offset of the batch Spark runs again when the query restarts: the newest in the
    offsets log when the commits log does not have it yet; None when every logged batch ran."""
    checkpoint = open_checkpoint(checkpoint)
    planned = newest_batch(checkpoint)
    if planned is None:
        return None
    ran = newest_batch(checkpoint, "commits")
    if ran is not None and ran >= planned:
        return None
    return read_batch_offset(checkpoint, planned)


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False
