"""A group member's fence on a table it has just been given: the table epoch as a Delta property.

Failure mode it prevents: the member that lost the table committing a round it prepared before
the hand-over. Its txn version (an older table epoch) would not stop the commit: Delta refuses a
transaction only when it conflicts with one that landed since it read the table, and a round of
the new owner may not have landed yet (or may touch other buckets). So before its first round of
the table the new owner sets the group's fence property (``kvTiering.fenceEpoch.group:<group>``,
:func:`~tiering.delta_log.layout.fence_property`) to its table epoch, in a metadata commit: every
commit prepared before it conflicts with it and fails, and every round of the group prepared after
it reads a fence above its own table epoch and is refused
(:class:`~tiering.errors.FencedEpochError`) before anything is written.

One meaning per fence: a writer's fence holds that writer's epochs only (a job's maintenance
fences with the job's term epoch under the job's name), so a job's fence never refuses its group's
rounds, nor a group's fence the job's own once it leaves the group.
"""

from __future__ import annotations

import logging

from deltalake import DeltaTable
from deltalake.transaction import CommitProperties, PostCommitHookProperties

from tiering.coord.write_authority import CommitEpoch
from tiering.delta_log.commits import fence_epoch, maintenance_metadata
from tiering.delta_log.layout import fence_property

__all__ = ["fence_table"]

log = logging.getLogger(__name__)

_NO_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)


def fence_table(dt: DeltaTable, table: str, *, writer: str, epoch: CommitEpoch) -> bool:
    """Raise ``writer``'s fence on the table to ``epoch`` in one metadata commit of ``writer``; False
    (nothing written) when it is already there or above."""
    current = fence_epoch(dt, writer)
    if current is not None and current >= epoch:
        return False
    dt.alter.set_table_properties(
        {fence_property(writer): str(epoch)},
        raise_if_not_exists=False,
        commit_properties=CommitProperties(
            custom_metadata=maintenance_metadata(job=writer, epoch=epoch, operation="fence the table for its new owner")
        ),
        post_commithook_properties=_NO_HOOKS,
    )
    log.info("table=%s fenced at table epoch %d (was %s) by %s", table, epoch, current, writer)
    return True
