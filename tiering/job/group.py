"""A tiering group's member as a term wires it: the rebalancer over the job's tables, weighed by
the size of their logs.

Failure modes:
- a member whose ``[tables]`` selection is not the group's: a :class:`ConfigError` as its term
  starts (:meth:`GroupMember.check_selection`), before it joins or owns anything;
- members weighing the tables differently and handing them back and forth: a table weighs its
  log's size class, which changes only at powers of two (:func:`log_size_classes`), and moves for
  balance only beyond the assignment's tolerance (coord/assignment.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tiering.conf.model import TieringConfig
from tiering.job.tables import included_tables

if TYPE_CHECKING:
    from tiering.coord.rebalancer import GroupRebalancer
    from tiering.kvstore.contract import StoreCatalog

__all__ = ["group_member", "log_size_classes"]


def log_size_classes(store: StoreCatalog, tables: list[str]) -> dict[str, int]:
    """Each table's weight in its group's balance (coord/assignment.py): the size class of its log
    in the store, the bit length of the changes it ever took (2**20 changes weigh 21, none 1), from
    one store call. A log's end only grows, so the class changes at powers of two and members
    reading it a moment apart agree; a lag, back near 0 after each commit, would have them hand
    tables back and forth."""
    ends = {name: sum(b.end for b in found.buckets.values()) for name, found in store.log_ends(tables).items()}
    return {name: max(1, end.bit_length()) for name, end in ends.items()}


def group_member(config: TieringConfig, group: str, term, store: StoreCatalog) -> GroupRebalancer:
    """This term's member of tiering group ``group``, not joined yet (:meth:`GroupRebalancer.start`
    joins); ConfigError now when its ``[tables]`` selection is not the group's."""
    from tiering.coord.group import GroupMember
    from tiering.coord.rebalancer import GroupRebalancer
    from tiering.coord.start_grace import StartGrace

    member = GroupMember(term.zk, group, config.job.name, term.granted, config.tables)
    member.check_selection()
    every_s = max(config.trigger.interval_s, 1.0)
    grace = StartGrace.of_session(  # the server's timeout, which peers' sessions expire by
        term.session_timeout_s, members=config.job.group_members, max_s=config.job.group_start_wait_s
    )
    return GroupRebalancer(
        member,
        lambda: included_tables(config, store),
        every_s,
        grace,
        weights=lambda tables: log_size_classes(store, tables),
    )
