"""Test-side oracle and helpers for end-to-end runs: what was written, what the lake holds.

The oracle is the test's own record of every upsert and delete it sent, keyed by primary key:
an independent truth to compare the lake with, row by row (not the store's files, which the
service itself reads).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tiering.conf.loader import load_config
from tiering.conf.model import TieringConfig
from tiering.kvstore.client import KvStoreClient
from tiering.kvstore.models import TableSpec
from tiering.lakestate.lake import Lake

SCHEMA = [
    {"name": "id", "type": "bigint"},
    {"name": "name", "type": "string"},
    {"name": "amount", "type": "double"},
    {"name": "qty", "type": "int"},
]
SYSTEM = ("__bucket", "__offset", "__timestamp")


class TableOracle:
    """A KV table in the store plus the test's own record of what it should hold."""

    def __init__(self, client: KvStoreClient, name: str, num_buckets: int = 4, seed: int = 0) -> None:
        self.client = client
        self.name = name
        self.rows: dict[int, dict] = {}
        self.rng = random.Random(f"{name}-{seed}")
        self.info = client.create_table(
            TableSpec.model_validate({"name": name, "schema": SCHEMA, "primary_key": ["id"], "num_buckets": num_buckets})
        )
        self.added: list[str] = []

    def add_column(self, name: str, type: str) -> None:
        """Append a nullable column upstream: the rows written so far hold null in it."""
        self.info = self.client.add_column(self.name, name, type)
        self.added.append(name)
        for row in self.rows.values():
            row[name] = None

    def upsert(self, ids, **added: Callable[[int], Any]) -> None:
        """Upsert ``ids``; an added column gets ``added[column](id)``, or null when not given
        (an upsert replaces the whole row)."""
        rows = [
            {"id": i, "name": f"{self.name}-{i}-{self.rng.randrange(10**6)}", "amount": self.rng.random() * 100, "qty": self.rng.randrange(1000),
             **{c: value(i) for c, value in added.items()}}
            for i in ids
        ]
        self.client.upsert(self.name, rows)
        self.rows.update({r["id"]: {**dict.fromkeys(self.added), **r} for r in rows})

    def delete(self, ids) -> None:
        ids = list(ids)
        self.client.delete(self.name, [{"id": i} for i in ids])
        for i in ids:
            self.rows.pop(i, None)

    def churn(self, n: int, key_space: int) -> None:
        """A realistic mix: inserts, updates of existing keys, deletes."""
        self.upsert(self.rng.sample(range(key_space), n))
        if self.rows:
            self.delete(self.rng.sample(sorted(self.rows), max(1, n // 5)))


def lake_rows(lake: Lake | Path, table: str) -> dict[int, dict]:
    """The lake table's user rows keyed by id (system columns checked, then dropped); ``lake``
    is a :class:`Lake` (any storage) or a local root."""
    lake = lake if isinstance(lake, Lake) else Lake.at(str(lake))
    data = lake.load(table).to_arrow().to_pylist()
    rows: dict[int, dict] = {}
    for row in data:
        assert all(c in row for c in SYSTEM), f"system columns missing in {table}: {sorted(row)}"
        assert row["id"] not in rows, f"duplicate key {row['id']} in lake table {table}"
        rows[row["id"]] = {k: v for k, v in row.items() if k not in SYSTEM}
    return rows


def assert_lake_equals(lake_root: Lake | Path, oracle: TableOracle) -> None:
    lake = lake_rows(lake_root, oracle.name)
    missing = sorted(set(oracle.rows) - set(lake))
    extra = sorted(set(lake) - set(oracle.rows))
    wrong = sorted(k for k in set(lake) & set(oracle.rows) if lake[k] != oracle.rows[k])
    assert not (missing or extra or wrong), (
        f"{oracle.name}: {len(missing)} missing {missing[:5]}, {len(extra)} extra {extra[:5]}, "
        f"{len(wrong)} differ {[(k, lake[k], oracle.rows[k]) for k in wrong[:3]]}"
    )


def make_config(tmp_path: Path, store_url: str, zk_hosts: str, job: str = "t-job", **overrides) -> TieringConfig:
    base = {
        "job.name": job,
        "job.checkpoint": str(tmp_path / "ckpt"),
        "kvstore.url": store_url,
        "zookeeper.hosts": zk_hosts,
        "zookeeper.session_timeout_s": 4.0,
        "lake.root": str(tmp_path / "lake"),
        "trigger.available_now": True,
        "trigger.interval_s": 1.0,
        "lease.duration_s": 60.0,
    }
    base.update(overrides)
    return load_config(None, {}, base)


def wait_until(predicate, timeout_s: float = 60.0, interval_s: float = 0.5, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def build_pyfiles_zip(dest: Path) -> Path:
    """The package as spark-submit ships it (``--py-files``), built the documented way."""
    repo = Path(__file__).resolve().parents[3]
    built = subprocess.run([str(repo / "scripts" / "build_pyfiles.sh"), str(dest)],
                           capture_output=True, text=True, env={**os.environ, "PYTHON": sys.executable})
    assert built.returncode == 0, built.stderr
    return dest


def tiering_cli(*argv: str) -> subprocess.CompletedProcess:
    """The ``tiering`` command as an operator runs it (no ``TIERING_*`` from the test's environment)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERING_")}
    return subprocess.run([sys.executable, "-m", "tiering.cli", *argv], env=env, capture_output=True, text=True,
                          timeout=120)


def write_conf(config: TieringConfig, path: Path) -> Path:
    """A TOML file with ``config``'s job, store, ZooKeeper and lake (what the CLI needs to find them)."""
    import tomli_w

    path.write_bytes(tomli_w.dumps({
        "job": {"name": config.job.name, "checkpoint": config.job.checkpoint},
        "kvstore": {"url": config.kvstore.url},
        "zookeeper": {"hosts": config.zookeeper.hosts},
        "lake": {"root": config.lake.root},
    }).encode())
    return path
