"""The demo's live view: per table, what was written, where the lake is, what the lease holds.

Failure modes it makes visible while they happen: a job that falls behind (lag per table), a
table that keeps failing (failed rounds), a lease that keeps pinning snapshots (leased). The
numbers come from the same functions as ``tiering status`` (the store's log ends against the
lake's own commit metadata); rounds and failures are counted from the job's round outcomes.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Group
from rich.table import Table

from tiering.delta_log.lake import Lake
from tiering.demo.scenario import Writer
from tiering.kvstore.client import KvStoreClient
from tiering.kvstore.models import TableInfo
from tiering.ops.status import held_snapshots, table_statuses
from tiering.round.outcome import RoundOutcome

__all__ = ["Progress", "TableProgress"]


@dataclass
class TableProgress:
    log_end: int = 0
    lake_offset: int = 0
    lag: int = 0
    leased: int = 0
    rounds: int = 0
    failures: int = 0


@dataclass
class Progress:
    """What the display shows; rounds are counted by the job's hook, the rest is polled."""

    phase: str = "starting"
    epoch: int | None = None
    last_round: int | None = None
    tables: dict[str, TableProgress] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_round(self, outcome: RoundOutcome) -> None:
        with self.lock:
            self.epoch = outcome.epoch
            self.last_round = outcome.round_id
            for table in outcome.committed:
                self.tables.setdefault(table, TableProgress()).rounds += 1
            for table in outcome.failed:
                self.tables.setdefault(table, TableProgress()).failures += 1

    def poll(self, client: KvStoreClient, lake: Lake, infos: list[TableInfo], lease_id: str | None) -> bool:
        """Refresh store and lake numbers; True when every table's lake reached its log end."""
        statuses = table_statuses(client, lake, infos, held_snapshots(client, lease_id) or Counter())
        with self.lock:
            for s in statuses:
                p = self.tables.setdefault(s.table, TableProgress())
                p.log_end, p.lake_offset, p.lag = s.log_end, s.lake_offset or 0, s.lag
                p.leased = s.leased_snapshots or 0  # the reference store lists its lease's holds
        return all(s.lag == 0 for s in statuses)

    def render(self, writer: Writer, elapsed_s: float, data_dir: Path) -> Group:
        with self.lock:
            head = (
                f"[bold]{self.phase}[/]  {elapsed_s:5.0f}s  epoch {self.epoch or '-'}  "
                f"round {'-' if self.last_round is None else self.last_round}  data {data_dir}"
            )
            table = Table(
                "table",
                "rows",
                "+ins",
                "~upd",
                "-del",
                "log end",
                "lake",
                "lag",
                "leased",
                "rounds",
                "failed",
                caption="log end / lake: changelog offsets summed over buckets; leased: snapshots held",
            )
            for name, _ in writer.tables:
                p = self.tables.get(name, TableProgress())
                c = writer.counts[name]
                table.add_row(
                    name,
                    str(len(writer.live[name])),
                    str(c.inserts),
                    str(c.updates),
                    str(c.deletes),
                    str(p.log_end),
                    str(p.lake_offset),
                    str(p.lag),
                    str(p.leased),
                    str(p.rounds),
                    str(p.failures),
                )
        return Group(head, table)
