"""What the job's unit tests share: a config selecting tables, and a store's catalog in memory."""

from __future__ import annotations

import pyarrow as pa

from tiering.conf.loader import load_config
from tiering.kvstore.contract import BucketLog, StoreColumn, StoreTable, TableLog


def config(**tables):
    return load_config(
        None,
        {},
        {
            "job.name": "j",
            "job.checkpoint": "/tmp/c",
            "kvstore.url": "http://127.0.0.1:1",
            "zookeeper.hosts": "127.0.0.1:1",
            "lake.root": "/tmp/l",
            **{f"tables.{k}": v for k, v in tables.items()},
        },
    )


def table(name: str) -> StoreTable:
    return StoreTable(name, 1, (StoreColumn("id", "bigint", pa.int64(), nullable=False),), ("id",), 1)


class Catalog:
    """A store's catalog (the seam's ``tables`` and ``log_ends``), in the store's order."""

    def __init__(self, *names: str, ends: dict[str, list[int]] | None = None) -> None:
        self.names = names
        self.ends = ends or {}

    def tables(self) -> list[StoreTable]:
        return [table(n) for n in self.names]

    def log_ends(self, tables) -> dict[str, TableLog]:
        return {
            t: TableLog(1, {b: BucketLog(b, 0, end) for b, end in enumerate(self.ends[t])})
            for t in tables
            if t in self.ends
        }
