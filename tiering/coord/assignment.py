"""Which member of a tiering group owns which table: a pure, deterministic balancing function.

Failure modes it prevents: a rebalance that moves every table when one member joins or leaves
(each moved table costs a hand-over: the old owner's round finished or abandoned, a table epoch
bumped, the new owner reading the lake's positions again), and members that disagree on the
assignment. Every member computes it from the same inputs (the live members, the selected tables,
the current owners from the table epoch znodes) and gets the same answer, whatever order they read
them in; a member then acts only on the tables the answer gives it, after bumping their epochs.

Why not kazoo's ``SetPartitioner``: it partitions by hashing the whole set again at every change
(most tables move when one member joins), it goes through a lock-step "release everything, then
acquire" phase during which no member tiers anything, and it knows no current owners. A kazoo
``Party`` (the membership, coord/group.py) plus this function keeps every table whose owner is
still a member, moves only what balancing needs, and lets the table epochs, not the partitioner's
locks, fence a slow member.

Balanced means by table count: every member owns ``n // m`` or ``n // m + 1`` tables. The members
that keep the most of their current tables are the ones allowed the extra table, so the number of
tables moved away from a live member is the least any balanced assignment moves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["assign"]


def assign(tables: Iterable[str], members: Iterable[str], current: Mapping[str, str]) -> dict[str, str]:
    """Table -> owning member for every table of ``tables`` (empty when there is no member).

    ``current``: table -> its owner now (an owner that is no longer a member, or a table absent
    from ``tables``, is ignored). Deterministic: the answer depends on the sets and the mapping,
    not on the order they come in.
    """
    names = sorted(set(tables))
    group = sorted(set(members))
    if not group:
        return {}
    kept: dict[str, list[str]] = {member: [] for member in group}
    free: list[str] = []
    for table in names:
        owner = current.get(table)
        if owner in kept:
            kept[owner].append(table)
        else:
            free.append(table)
    base, extra = divmod(len(names), len(group))
    most_kept_first = sorted(group, key=lambda member: (-len(kept[member]), member))
    target = {member: base + (1 if rank < extra else 0) for rank, member in enumerate(most_kept_first)}
    for member in group:
        free.extend(kept[member][target[member] :])
        del kept[member][target[member] :]
    free.sort()
    owners = {table: member for member, owned in kept.items() for table in owned}
    handed = iter(free)
    for member in group:
        for _ in range(target[member] - len(kept[member])):
            owners[next(handed)] = member
    return owners
