"""``tiering group``: who is in a job's tiering group, where each member runs, what it owns.

Failure mode this guards against: guessing which process tiers a table. A table that lags may be
owned by a member that is slow, frozen or gone (its tables wait for its session to expire), and
only ZooKeeper knows: the member nodes (job, host, pid, since when) and the table epoch znodes
(owner, table epoch). Read-only, with a session of its own: it joins nothing and bumps nothing.
"""

from __future__ import annotations

import time

from tiering.conf.model import TieringConfig
from tiering.console import output_console
from tiering.coord.group import GroupView, read_group
from tiering.errors import UsageError
from tiering.ops.status import selected_tables

__all__ = ["group_view", "render_group"]


def group_view(config: TieringConfig, *, timeout_s: float) -> GroupView:
    """The job's group as ZooKeeper holds it, over the tables its ``[tables]`` selection picks in
    the store now; UsageError when the job is in no group."""
    group = config.job.group
    if group is None:
        raise UsageError(f"job {config.job.name!r} is in no tiering group ([job] group is unset)")
    return read_group(config.zookeeper.hosts, group, selected_tables(config, timeout_s=timeout_s), timeout_s=timeout_s)


def render_group(view: GroupView, console=None) -> None:
    """One row per member node (oldest first), then the tables no live member owns."""
    from rich.table import Table
    from rich.text import Text

    console = console or output_console()
    listing = view.listing()
    console.print(Text.assemble("group ", (view.group, "bold"), f"  members {len(listing['members'])}"))
    rows = Table("member", "host", "pid", "since", "tables", "owned (table@table epoch)")
    for member in listing["members"]:
        owned = member["tables"]
        rows.add_row(
            Text(member["job"]),
            member["host"] or "-",
            "-" if member["pid"] is None else str(member["pid"]),
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(member["since_ms"] / 1000)),
            str(len(owned)),
            Text(", ".join(f"{t}@{e}" for t, e in owned.items()) or "-"),
        )
    console.print(rows)
    unassigned = listing["unassigned"]
    if unassigned:
        console.print(
            Text(
                f"{len(unassigned)} table(s) no live member owns: "
                + ", ".join(t if job is None else f"{t} (last {job})" for t, job in unassigned.items())
            )
        )
