"""A `tiering run` job over a real Fluss database, shared by the Fluss job tests: its conf, the
rows a test writes, the lake's copy of them and a wait for snapshots that cover the log."""

from __future__ import annotations

import uuid
from decimal import Decimal
from pathlib import Path

import tomli_w

from tests.support.fluss import client_jar
from tests.support.lake import delta_rows
from tests.support.store_sides import SNAPSHOT_WAIT
from tests.support.waiting import wait_until

COLUMNS = {"id": "BIGINT NOT NULL", "name": "STRING", "amount": "DECIMAL(18,2)", "n": "INT"}
BUCKETS = 3


def row(key: int, version: int = 0) -> dict:
    return {"id": key, "name": f"name-{key}-v{version}", "amount": Decimal(key * 100 + version) / 100, "n": version}


def job_conf(tmp_path: Path, job: str, servers: str, database: str, zk_hosts: str, **sections: dict) -> Path:
    """A job of ``kind = "fluss"``: fluss-client on ``spark.jars`` (the driver's Java client; the
    executors' readers start a gateway JVM from the same jar); ``sections`` added as they are."""
    conf = {
        "job": {"name": job, "checkpoint": str(tmp_path / "ckpt")},
        "kvstore": {"kind": "fluss", "bootstrap_servers": servers, "database": database},
        "zookeeper": {"hosts": zk_hosts, "session_timeout_s": 4.0},
        "lake": {"root": str(tmp_path / "lake")},
        "lease": {"duration_s": 60.0},
        "spark": {
            "spark.master": "local[2]",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "4",
            "spark.jars": str(client_jar()),
        },
        **sections,
    }
    path = tmp_path / "tiering.toml"
    path.write_bytes(tomli_w.dumps(conf).encode())
    return path


def lake_rows(tmp_path: Path, table: str) -> list[dict]:
    """The lake table's user columns (the system columns left out), sorted by key."""
    rows = delta_rows(tmp_path / "lake" / table).select(list(COLUMNS)).to_pylist()
    return sorted(rows, key=lambda r: r["id"])


def snapshots_covering_the_log(store, table: str) -> dict:
    """Every bucket's newest snapshot, once each covers its bucket's log end."""

    def covering():
        ends = store.log_ends([table])[table].buckets
        refs = store.latest_snapshots(table)
        if len(refs) == len(ends) and all(refs[b].log_offset >= log.end for b, log in ends.items() if log.end):
            return refs
        return None

    return wait_until(covering, f"snapshots of {table} covering its log", **SNAPSHOT_WAIT)


def table_with_changes_after_its_snapshot(writer, store, prefix: str, rows: int, buckets: int) -> str:
    """A new table (``prefix`` and a unique suffix) of ``rows`` rows, snapshotted, then a third of
    them updated and a seventh deleted: a bootstrap then the changelog on top of it."""
    table = f"{prefix}_{uuid.uuid4().hex[:6]}"
    writer.create_table(table, COLUMNS, ["id"], buckets)
    writer.upsert(table, [row(k) for k in range(rows)])
    snapshots_covering_the_log(store, table)
    writer.upsert(table, [row(k, 1) for k in range(0, rows, 3)])
    writer.delete(table, [{"id": k} for k in range(1, rows, 7)])
    return table
