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

Where the tables' weights are known (a table's lag or size, in whole units) and differ, balanced
means by weight, within one table's weight: no table can move from its owner to the least loaded
member and leave both nearer the middle (for every member, its load minus the least load is at
most its lightest table's weight; with every weight 1 this is the count rule). Current owners keep
their tables; the free ones (new, or a departed member's) go heaviest first to the least loaded
member; then, while some table's move to the least loaded member would narrow the spread, the one
that narrows it most moves. Each such move lowers the sum of the squared loads, so it ends; an
assignment already balanced moves nothing. Fewest moves is not guaranteed there (that is a
bin-packing question); only moves that narrow the spread are made.

Weights change while writers run, and members read them a moment apart: balancing on every
difference would hand tables back and forth, each move a hand-over. So a table kept by a live owner
moves for balance only once the group is out of balance beyond ``tolerance``: some such move would
narrow the spread even with every weight misread by that fraction against it, the owner's other
tables read high and the least loaded member's read low (``(1 - tolerance) * (owner's load - the
table's weight) > (1 + tolerance) * least load``). Then every move that narrows the spread is made,
as above, not just those back inside the tolerance; so an assignment this function made from
scratch or moved tables for stays as it is while every weight stays within ``tolerance`` of the
weights it read, and members whose readings each stay within 10% of the same weights (at the
default 20%) take tables from a live member in one of their successive rebalances at most. The
price: a group can stay that far out of balance (as within the ``slop`` of HBase's load balancer,
20% there too). Free tables (new ones, a departed member's) are placed at once; with equal weights
known, a group within the tolerance keeps its owners, else it is balanced by count. Every member
must compute with the same tolerance, so it is this module's constant, not a setting.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

__all__ = ["BALANCE_TOLERANCE", "assign"]

#: how far off a table's weight may be read without a table moving for balance (module docstring)
BALANCE_TOLERANCE = Fraction(1, 5)


def assign(
    tables: Iterable[str],
    members: Iterable[str],
    current: Mapping[str, str],
    weights: Mapping[str, int] | None = None,
    tolerance: Fraction = BALANCE_TOLERANCE,
) -> dict[str, str]:
    """Table -> owning member for every table of ``tables`` (empty when there is no member).

    ``current``: table -> its owner now (an owner that is no longer a member, or a table absent
    from ``tables``, is ignored). ``weights``: table -> its weight, at least 1 (a table absent
    weighs 1); None, or every weight the same, balances by table count. ``tolerance``, in [0, 1):
    how far off a weight may be read without a table moving for balance (0: every imbalance a
    move can narrow is narrowed); unused without weights. Deterministic: the answer depends on the
    sets and the mappings, not on the order they come in.
    """
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance {tolerance}: expected a fraction in [0, 1)")
    names = sorted(set(tables))
    group = sorted(set(members))
    if not group:
        return {}
    weight = {table: max(1, int((weights or {}).get(table, 1))) for table in names}
    if weights is not None and all(current.get(table) in group for table in names):
        owners = {table: current[table] for table in names}
        if _narrowing_move(owners, _loads(owners, group, weight), weight, set(names), tolerance) is None:
            return owners
    if len(set(weight.values())) > 1:
        return _by_weight(names, group, current, weight, tolerance)
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


def _loads(owners: Mapping[str, str], group: list[str], weight: Mapping[str, int]) -> dict[str, int]:
    load = dict.fromkeys(group, 0)
    for table, member in owners.items():
        load[member] += weight[table]
    return load


def _by_weight(
    names: list[str], group: list[str], current: Mapping[str, str], weight: dict[str, int], tolerance: Fraction
) -> dict[str, str]:
    """The weighted balance: current owners kept, free tables heaviest first to the least loaded,
    then the moves that narrow the spread, a kept table's only once one clears ``tolerance`` (see
    the module's docstring)."""
    owners = {table: current[table] for table in names if current.get(table) in group}
    load = _loads(owners, group, weight)
    for table in sorted((t for t in names if t not in owners), key=lambda t: (-weight[t], t)):
        least = min(group, key=lambda m: (load[m], m))
        owners[table] = least
        load[least] += weight[table]
    kept = {table for table in owners if current.get(table) == owners[table]}
    margin = tolerance
    while (move := _narrowing_move(owners, load, weight, kept, margin)) is not None:
        table, least = move
        if table in kept:  # out of balance: every narrowing move now, not just back inside the tolerance
            margin = Fraction(0)
        load[owners[table]] -= weight[table]
        load[least] += weight[table]
        owners[table] = least
    return owners


def _narrowing_move(
    owners: dict[str, str], load: dict[str, int], weight: dict[str, int], kept: set[str], tolerance: Fraction
) -> tuple[str, str] | None:
    """The table whose move to the least loaded member narrows the spread, with that member (None
    when none does; a table of ``kept`` only when the move clears ``tolerance``): a table handed out
    in this rebalance before one kept from its owner (moving it again costs no hand-over), then the
    one that narrows it most (its weight nearest half the gap)."""
    least = min(load, key=lambda m: (load[m], m))
    candidates = [
        t
        for t, m in owners.items()
        if _clears(load[m] - weight[t], load[least], tolerance if t in kept else Fraction(0))
    ]
    if not candidates:
        return None
    best = min(
        candidates, key=lambda t: (t in kept, abs(load[owners[t]] - load[least] - 2 * weight[t]), -load[owners[t]], t)
    )
    return best, least


def _clears(rest: int, least: int, tolerance: Fraction) -> bool:
    """Whether moving a table to the least loaded member narrows the spread: its owner, left with
    ``rest``, still carries more than that member's ``least``, every weight misread by
    ``tolerance`` against the move."""
    return (1 - tolerance) * rest > (1 + tolerance) * least
