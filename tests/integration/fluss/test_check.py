"""`tiering check` and a run's first question to the store, against a real Apache Fluss cluster: the
servers, the database, the tables ``[tables]`` selects (log tables skipped, named), the snapshot
lease API; with Fluss down or the database missing, one line and a non-zero exit."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
import tomli_w

from tests.support.drivers import tiering_cli
from tests.support.fluss import client_jar, new_table
from tiering.cli import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from tiering.conf.loader import load_config
from tiering.errors import ConfigError, StoreUnavailableError
from tiering.ops.preflight import before_run, preflight

pytestmark = pytest.mark.integration

fluss = pytest.importorskip("fluss")


@pytest.fixture(scope="module")
def database(fluss_cluster) -> str:
    """A database holding a primary-key table ``orders`` and a log table ``events``."""
    name = f"check_{uuid.uuid4().hex[:8]}"
    key = pa.field("id", pa.int32(), nullable=False)

    async def scenario():
        connection, _, _, _ = await new_table(
            fluss_cluster, name, "orders", fluss.Schema(pa.schema([key, ("v", pa.string())]), primary_keys=["id"]), 1
        )
        await connection.close()
        connection, _, _, _ = await new_table(
            fluss_cluster, name, "events", fluss.Schema(pa.schema([("id", pa.int32())])), 1
        )
        await connection.close()

    asyncio.run(scenario())
    return name


def fluss_conf(tmp_path: Path, servers: str, database: str, zk_hosts: str, job: str, **sections: dict) -> Path:
    """A config of ``kind = "fluss"`` with fluss-client on ``spark.jars`` (the check's lease probe
    runs in a JVM started from it)."""
    conf: dict = {
        "job": {"name": job, "checkpoint": str(tmp_path / "ckpt")},
        "kvstore": {"kind": "fluss", "bootstrap_servers": servers, "database": database},
        "zookeeper": {"hosts": zk_hosts},
        "lake": {"root": str(tmp_path / "lake")},
        "spark": {"spark.jars": str(client_jar())},
    }
    for section, values in sections.items():
        conf.setdefault(section, {}).update(values)
    path = tmp_path / "tiering.toml"
    path.write_bytes(tomli_w.dumps(conf).encode())
    return path


def kvstore_verdict(conf: Path):
    return next(v for v in preflight(load_config(conf, {}, {}), timeout_s=5.0) if v.name == "kvstore")


def test_check_probes_servers_database_tables_and_the_lease_api(
    fluss_cluster, database, zk_server, unique_job, tmp_path
):
    conf = fluss_conf(tmp_path, fluss_cluster.bootstrap_servers, database, zk_server.hosts, unique_job)

    result = tiering_cli("check", "--conf", str(conf))

    assert result.returncode == EXIT_OK, result.stdout + result.stderr
    line = next(line for line in result.stdout.splitlines() if line.split()[1] == "kvstore")
    assert line.split()[0] == "ok", line
    assert f"Fluss database {database!r} at {fluss_cluster.bootstrap_servers}: reachable" in line
    assert "1 of 1 tables selected (orders)" in line
    assert "log tables skipped (no primary key): events" in line
    assert "snapshot lease API: a lease created and dropped" in line
    assert result.stderr == "", "the verdict names the skipped log tables: no store log lines besides"


def test_a_missing_database_is_named_with_the_databases_fluss_has(
    fluss_cluster, database, zk_server, unique_job, tmp_path
):
    conf = fluss_conf(tmp_path, fluss_cluster.bootstrap_servers, "no_such_db", zk_server.hosts, unique_job)

    verdict = kvstore_verdict(conf)

    assert not verdict.ok
    assert verdict.detail.startswith(
        f"invalid configuration: kvstore.database: Fluss at {fluss_cluster.bootstrap_servers} has no database "
        "'no_such_db'; it has "
    ), verdict.detail
    assert database in verdict.detail
    with pytest.raises(ConfigError, match="has no database 'no_such_db'"):
        before_run(load_config(conf, {}, {}))


def test_an_include_pattern_that_matches_no_fluss_table_is_named(
    fluss_cluster, database, zk_server, unique_job, tmp_path
):
    conf = fluss_conf(
        tmp_path,
        fluss_cluster.bootstrap_servers,
        database,
        zk_server.hosts,
        unique_job,
        tables={"include": ["ordres"]},
    )

    verdict = kvstore_verdict(conf)

    assert not verdict.ok
    assert verdict.detail == (
        "invalid configuration: tables.include: 'ordres' matches no table in the store at "
        f"Fluss database {database!r} at {fluss_cluster.bootstrap_servers}, which has 1: orders"
    )


def test_a_stopped_fluss_fails_check_and_an_available_now_run_in_one_line(
    fluss_cluster_factory, zk_server, unique_job, tmp_path
):
    cluster = fluss_cluster_factory()
    servers = cluster.bootstrap_servers
    conf = fluss_conf(tmp_path, servers, "shop", zk_server.hosts, unique_job, trigger={"available_now": True})
    cluster.stop()

    checked = tiering_cli("check", "--conf", str(conf), "--timeout", "3")
    run = tiering_cli("run", "--conf", str(conf))

    assert checked.returncode == EXIT_FAILURE, checked.stdout + checked.stderr
    assert [line.split()[0] for line in checked.stdout.splitlines()] == ["ok", "FAILED", "ok", "ok"]
    [line] = checked.stderr.splitlines()
    assert line.startswith(f"tiering: check failed: kvstore: Fluss at {servers}: ") and "refused" in line, line
    assert run.returncode == EXIT_FAILURE, run.stdout + run.stderr
    [run_line] = run.stderr.splitlines()
    assert run_line.startswith(f"tiering: Fluss at {servers}: ") and "refused" in run_line, run_line
    assert not (tmp_path / "ckpt").exists() and not (tmp_path / "lake").exists(), "nothing written"
    with pytest.raises(StoreUnavailableError, match=f"Fluss at {servers}: "):
        before_run(load_config(conf, {}, {}), timeout_s=3.0)


def test_a_missing_database_fails_an_available_now_run_with_a_usage_exit(
    fluss_cluster, database, zk_server, unique_job, tmp_path
):
    conf = fluss_conf(
        tmp_path,
        fluss_cluster.bootstrap_servers,
        "no_such_db",
        zk_server.hosts,
        unique_job,
        trigger={"available_now": True},
    )

    run = tiering_cli("run", "--conf", str(conf))

    assert run.returncode == EXIT_USAGE, run.stdout + run.stderr
    assert run.stderr.splitlines() == [
        "tiering: invalid configuration:",
        f"  kvstore.database: Fluss at {fluss_cluster.bootstrap_servers} has no database 'no_such_db'; it has "
        + run.stderr.split("; it has ")[-1].rstrip("\n"),
    ]
    assert database in run.stderr, "the databases Fluss has are named"
    assert not (tmp_path / "ckpt").exists(), "nothing written"
