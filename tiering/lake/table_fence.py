"""A group member's fence on a table it has just been given: the table epoch as a Delta property.

Failure mode it prevents: the member that lost the table committing a round it prepared before
the hand-over. Its txn version (an older table epoch) would not stop the commit: Delta refuses a
transaction only when it conflicts with one that landed since it read the table, and a round of
the new owner may not have landed yet (or may touch other buckets). So before its first round of
the table the new owner sets the fence property (``kvTiering.fenceEpoch``, the one maintenance
passes set with a job's epoch) to its table epoch, in a metadata commit: every commit prepared
before it conflicts with it and fails, and every round prepared after it reads a fence above its
own epoch and is refused (:class:`~tiering.errors.FencedEpochError`) before anything is written.
"""

from __future__ import annotations

import logging

from deltalake import DeltaTable
from deltalake.transaction import CommitProperties, PostCommitHookProperties

from tiering.delta_log.commits import fence_epoch, maintenance_metadata
from tiering.delta_log.layout import FENCE_PROPERTY

__all__ = ["fence_table"]

log = logging.getLogger(__name__)

_NO_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)


def fence_table(dt: DeltaTable, table: str, *, writer: str, epoch: int) -> bool:
    """Raise the table's fence to ``epoch`` in one metadata commit of ``writer``; False (nothing
    written) when it is already there or above."""
    current = fence_epoch(dt)
    if current is not None and current >= epoch:
        return False
    dt.alter.set_table_properties(
        {FENCE_PROPERTY: str(epoch)},
        raise_if_not_exists=False,
        commit_properties=CommitProperties(
            custom_metadata=maintenance_metadata(job=writer, epoch=epoch, operation="fence the table for its new owner")
        ),
        post_commithook_properties=_NO_HOOKS,
    )
    log.info("table=%s fenced at table epoch %d (was %s) by %s", table, epoch, current, writer)
    return True
