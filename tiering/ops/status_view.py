"""How the operator commands draw what they read: `tiering status` (once, or ``--watch``) and
`tiering leases list`, as rich renderables printed on the commands' console.

Failure mode this guards against: a monitor that dies on the first blip (:func:`watch_status`
keeps the last status on screen and says why it is stale). Reads nothing but what it is handed,
except :func:`watch_status`, which reads the status again at every refresh.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING

from tiering.conf.model import TieringConfig
from tiering.console import output_console
from tiering.delta_log.lake import Lake
from tiering.errors import TieringError
from tiering.kvstore.models import Lease
from tiering.ops.preflight import fluss_store
from tiering.ops.status import JobStatus, expires_in_s, job_status
from tiering.state.checkpoint_store import checkpoint_of
from tiering.state.lease_file import job_of_lease

if TYPE_CHECKING:
    from tiering.ops.fluss_leases import KeptLease

__all__ = ["MINE_MARK", "render_status", "status_view", "watch_status", "render_leases", "render_kept_lease"]

#: What `tiering leases list` marks the lease in the job's checkpoint with.
MINE_MARK = "*"


def render_status(status: JobStatus, console=None) -> None:
    """Print ``status`` as a header line, one table row per store table, then the failing tables."""
    (console or output_console()).print(status_view(status))


def status_view(status: JobStatus, note: str = ""):
    """``status`` as one rich renderable (what :func:`render_status` prints and ``--watch`` redraws)."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    leader = status.leader or "none"
    epoch = "never led" if status.epoch is None else str(status.epoch)
    head = Text.assemble(
        "job ",
        (status.job, "bold"),
        f"  leader {leader}  epoch {epoch}  "
        f"contenders {status.contenders}  lease {status.lease_id or 'none'}"
        f"{'' if status.leases else ' (off: the store has no lease API)'}{note}",
    )
    table = Table(
        "table",
        "table_id",
        "state",
        "lake offset",
        "lag",
        "fresh (s)",
        "lake version",
        "lake epoch",
        "last commit",
        "columns store/lake",
        "leased snapshots",
    )
    for t in status.tables:
        table.add_row(
            Text(t.table),
            str(t.table_id),
            t.state,
            _or_dash(t.lake_offset),
            str(t.lag),
            "-" if t.freshness_s is None else f"{t.freshness_s:.1f}",
            _or_dash(t.lake_version),
            _or_dash(t.lake_epoch),
            _when(t.lake_commit_ms),
            f"{_or_dash(t.store_columns)}/{_or_dash(t.lake_columns)}",
            _or_dash(t.leased_snapshots),
        )
    failures = [
        Text(
            f"{t.table}: {t.state}, {t.consecutive_failures} round(s) in a row, last at {_when(t.last_failure_ms)}"
            + (f" ({t.last_failure_cause}, in state {t.last_failure_state})" if t.last_failure_cause else "")
            + f": {t.last_failure}"
        )
        for t in status.tables
        if t.last_failure is not None and (t.consecutive_failures or t.state == "dropped")
    ] + [Text(f"{t.table}: its Delta log cannot be read: {t.lake_error}") for t in status.tables if t.lake_error]
    return Group(head, *_group_lines(status.group), table, *failures)


def _group_lines(group: dict | None) -> list:
    """The group's members and each table's owner at its table epoch (none outside a group)."""
    from rich.text import Text

    if group is None:
        return []
    owners = ", ".join(f"{t} {o['job']}@{o['table_epoch']}" for t, o in group["owners"].items())
    return [Text(f"group {group['group']}  members {', '.join(group['members']) or 'none'}  owners {owners or 'none'}")]


def watch_status(
    config: TieringConfig, every_s: float, console=None, *, timeout_s: float, stop: threading.Event | None = None
) -> None:
    """Redraw the status every ``every_s`` seconds until ``stop`` is set (or, without one, until
    interrupted: KeyboardInterrupt).

    Failure mode: a monitor that dies on the first blip. A refresh that fails (ZooKeeper or the
    store out of reach) keeps the last status on screen, says when and why it is stale, and the
    next refresh tries again; the job's lake and checkpoint are built once, before the first (an
    unusable ``lake.root`` is a :class:`ConfigError` then, not a refresh failing forever), and so
    is a Fluss job's store (its connections, gateway JVM and changelog reader serve every
    refresh; closed when the watch ends; one that lost Fluss connects again). In a
    terminal the view is redrawn in place; anywhere else (a file, a pipe) each refresh is printed
    after the last, a log of the job's progress. ``stop`` is looked at between refreshes only: a
    refresh interrupted inside kazoo or the store client would leave a client half started
    (`tiering status --watch` sets it on Ctrl-C).
    """
    from rich.console import Group
    from rich.live import Live
    from rich.text import Text

    console = console or output_console()
    stop = stop or threading.Event()
    # every refresh opens and closes a ZooKeeper session: four INFO lines each, scrolling the view
    kazoo_log = logging.getLogger("kazoo.client")
    kazoo_log.setLevel(max(logging.WARNING, kazoo_log.getEffectiveLevel()))

    lake, checkpoint = Lake.of(config.lake), checkpoint_of(config)  # an unusable lake root: refused here, once
    fluss = fluss_store(config, timeout_s) if config.kvstore.kind == "fluss" else None
    last: JobStatus | None = None

    def refreshed():
        nonlocal last
        try:
            last = job_status(config, timeout_s=timeout_s, lake=lake, checkpoint=checkpoint, fluss=fluss)
        except (TieringError, OSError) as e:
            stale = Text(f"refresh failed at {time.strftime('%H:%M:%S')}: {e}", style="bold red")
            return stale if last is None else Group(stale, status_view(last))
        return status_view(last, f"  updated {time.strftime('%H:%M:%S')}, every {every_s:g}s (Ctrl-C quits)")

    try:
        if console.is_terminal:
            with Live(console=console, auto_refresh=False, transient=False) as live:
                while not stop.is_set():
                    live.update(refreshed(), refresh=True)
                    stop.wait(every_s)
            return
        while not stop.is_set():
            console.print(refreshed(), "")
            stop.wait(every_s)
    finally:
        if fluss is not None:
            fluss.close()


def _when(ms: int | None) -> str:
    return "-" if ms is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def render_leases(leases: list[Lease], job: str, mine: str | None, console=None, *, every_job: bool = False) -> None:
    """Print one row per lease (with the job it is for when ``every_job``); ``mine``, the lease in
    ``job``'s checkpoint, is marked with ``*``, which a line under the table explains."""
    from rich.table import Table

    console = console or output_console()
    columns = ("job", "lease", "epoch", "expires in", "snapshots (by table_id)")
    table = Table(*columns[0 if every_job else 1 :])
    for lease in leases:
        held = Counter(ref.table_id for ref in lease.snapshots)
        by_table = ", ".join(f"{t}: {n}" for t, n in sorted(held.items())) or "none"
        mark = f" {MINE_MARK}" if lease.lease_id == mine else ""
        row = (
            job_of_lease(lease.lease_id) or "?",
            f"{lease.lease_id}{mark}",
            str(lease.epoch),
            f"{expires_in_s(lease):.0f}s",
            by_table,
        )
        table.add_row(*row[0 if every_job else 1 :])
    console.print(table)
    if any(lease.lease_id == mine for lease in leases):
        console.print(f"{MINE_MARK} the lease in this job's checkpoint: the one its runs hold snapshots with")
    if not leases:
        console.print("no leases in the store" if every_job else f"no leases of job {job!r} in the store")


def render_kept_lease(kept: KeptLease | None, job: str, console=None) -> None:
    """Print a Fluss job's lease as its checkpoint knows it (:func:`tiering.ops.fluss_leases.kept_lease`):
    the lease id, marked as the checkpoint's, and its round in flight's snapshots by table; then
    the line saying Fluss lists no lease."""
    from rich.table import Table

    from tiering.ops.fluss_leases import NO_LISTING

    console = console or output_console()
    if kept is None:
        console.print(f"no lease id in job {job!r}'s checkpoint yet (its first run makes one)")
    else:
        table = Table("lease", "epoch", "expires in", "round in flight's snapshots (table: bucket/snapshot)")
        planned: dict[str, list[str]] = {}
        for split in kept.in_flight:
            planned.setdefault(split.table, []).append(f"{split.bucket}/{split.snapshot_id}")
        in_flight = "; ".join(f"{t}: {', '.join(held)}" for t, held in sorted(planned.items())) or "none"
        table.add_row(f"{kept.lease_id} {MINE_MARK}", "-", "-", in_flight)
        console.print(table)
        console.print(f"{MINE_MARK} the lease in this job's checkpoint: the one its runs hold snapshots with")
    console.print(f"{NO_LISTING} (epoch and expiry are Fluss's own, unknown here)")


def _or_dash(value: int | None) -> str:
    return "-" if value is None else str(value)
