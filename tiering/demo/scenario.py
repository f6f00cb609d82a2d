"""The demo's upstream: a few realistic tables and a writer of inserts, updates and deletes.

Failure mode it is built to provoke: tiering that only works for append-only data. The writer
keeps updating and deleting keys it inserted earlier, in every table, while tiering runs, so the
lake must apply changes per key in order and never resurrect a deleted row.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from tiering.kvstore.client import KvStoreClient
from tiering.kvstore.models import TableSpec

__all__ = ["DemoTable", "DEMO_TABLES", "demo_tables", "Writer", "WriteCounts"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DemoTable:
    """A table's schema and how to make its key ``i`` and a fresh version of its row."""

    name: str
    schema: list[dict]
    primary_key: list[str]
    row: Callable[[int, random.Random, dt.datetime], dict]
    num_buckets: int = 4

    def spec(self, suffix: str = "") -> TableSpec:
        return TableSpec.model_validate(
            {
                "name": self.name + suffix,
                "schema": self.schema,
                "primary_key": self.primary_key,
                "num_buckets": self.num_buckets,
            }
        )


def _col(name: str, type_: str) -> dict:
    return {"name": name, "type": type_}


def _money(rng: random.Random) -> str:
    return str(Decimal(rng.randrange(100, 500_000)) / 100)


def _iso(t: dt.datetime) -> str:
    return t.isoformat()


_STATUSES = ("NEW", "PAID", "SHIPPED", "DELIVERED", "CANCELLED")
_COUNTRIES = ("DE", "FR", "US", "BR", "JP", "IN", "NG", "SE")
_WAREHOUSES = ("ams", "fra", "iad", "sin")

DEMO_TABLES: tuple[DemoTable, ...] = (
    DemoTable(
        "orders",
        [
            _col("order_id", "bigint"),
            _col("customer_id", "bigint"),
            _col("status", "string"),
            _col("amount", "decimal(12,2)"),
            _col("updated_at", "timestamp"),
        ],
        ["order_id"],
        lambda i, rng, now: {
            "order_id": i,
            "customer_id": rng.randrange(10_000),
            "status": rng.choice(_STATUSES),
            "amount": _money(rng),
            "updated_at": _iso(now),
        },
    ),
    DemoTable(
        "customers",
        [
            _col("customer_id", "bigint"),
            _col("name", "string"),
            _col("email", "string"),
            _col("country", "string"),
            _col("signup_date", "date"),
            _col("vip", "boolean"),
        ],
        ["customer_id"],
        lambda i, rng, now: {
            "customer_id": i,
            "name": f"customer {i}",
            "email": f"c{i}.{rng.randrange(99)}@example.com",
            "country": rng.choice(_COUNTRIES),
            "signup_date": (now.date() - dt.timedelta(days=rng.randrange(2000))).isoformat(),
            "vip": rng.random() < 0.1,
        },
        num_buckets=3,
    ),
    DemoTable(
        "inventory",
        [
            _col("warehouse", "string"),
            _col("sku", "string"),
            _col("qty", "int"),
            _col("price", "double"),
            _col("updated_at", "timestamp"),
        ],
        ["warehouse", "sku"],
        lambda i, rng, now: {
            "warehouse": _WAREHOUSES[i % 4],
            "sku": f"SKU-{i // 4:06d}",
            "qty": rng.randrange(500),
            "price": round(rng.uniform(1, 300), 2),
            "updated_at": _iso(now),
        },
        num_buckets=2,
    ),
    DemoTable(
        "payments",
        [
            _col("payment_id", "bigint"),
            _col("order_id", "bigint"),
            _col("method", "string"),
            _col("amount", "decimal(12,2)"),
            _col("paid_at", "timestamp"),
        ],
        ["payment_id"],
        lambda i, rng, now: {
            "payment_id": i,
            "order_id": rng.randrange(100_000),
            "method": rng.choice(("card", "sepa", "pix")),
            "amount": _money(rng),
            "paid_at": _iso(now),
        },
    ),
)


def demo_tables(n: int) -> list[tuple[str, DemoTable]]:
    """``n`` (name, kind) pairs: the kinds in order, then again with a numeric suffix."""
    out = []
    for i in range(n):
        kind = DEMO_TABLES[i % len(DEMO_TABLES)]
        suffix = "" if i < len(DEMO_TABLES) else f"_{i // len(DEMO_TABLES) + 1}"
        out.append((kind.name + suffix, kind))
    return out


def _key(kind: DemoTable, row: dict) -> dict:
    return {k: row[k] for k in kind.primary_key}


@dataclass
class WriteCounts:
    inserts: int = 0
    updates: int = 0
    deletes: int = 0


class Writer:
    """Writes a realistic mix to every table until stopped: new keys, updates, deletes."""

    def __init__(self, client: KvStoreClient, tables: list[tuple[str, DemoTable]], seed: int = 7) -> None:
        self.client = client
        self.tables = tables
        self.rng = random.Random(seed)
        self.next_id = {name: 0 for name, _ in tables}
        self.live: dict[str, list[int]] = {name: [] for name, _ in tables}
        self.counts = {name: WriteCounts() for name, _ in tables}
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="demo-writer", daemon=True)

    def load(self, rows: int) -> None:
        for name, kind in self.tables:
            self._insert(name, kind, rows)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def _loop(self) -> None:
        try:
            while not self._stop.wait(0.2):
                for name, kind in self.tables:
                    self._tick(name, kind)
        except BaseException as e:  # noqa: BLE001 - reported by the demo, which then fails
            self.error = e
            log.exception("demo writer failed")

    def _tick(self, name: str, kind: DemoTable) -> None:
        self._insert(name, kind, self.rng.randrange(10, 30))
        live = self.live[name]
        now = dt.datetime.now(dt.UTC)
        updated = self.rng.sample(live, min(len(live), self.rng.randrange(5, 15)))
        if updated:
            self.client.upsert(name, [kind.row(i, self.rng, now) for i in updated])
            self.counts[name].updates += len(updated)
        deleted = self.rng.sample(live, min(len(live), self.rng.randrange(2, 8)))
        if deleted:
            self.client.delete(name, [_key(kind, kind.row(i, self.rng, now)) for i in deleted])
            gone = set(deleted)
            self.live[name] = [i for i in live if i not in gone]
            self.counts[name].deletes += len(deleted)

    def _insert(self, name: str, kind: DemoTable, n: int) -> None:
        start = self.next_id[name]
        now = dt.datetime.now(dt.UTC)
        self.client.upsert(name, [kind.row(i, self.rng, now) for i in range(start, start + n)])
        self.next_id[name] = start + n
        self.live[name].extend(range(start, start + n))
        self.counts[name].inserts += n
