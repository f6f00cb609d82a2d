"""Two jobs tiering one store table into two lakes: real store process, ZooKeeper, local Spark, Delta.

Each job has its own epochs, so the store cannot fence one with the other's: the lake report
names its job, and the store holds one job's report per table. The failure modes looked for: the
second job settling the table on the first job's report (an availableNow run that commits
nothing and says nothing), its reports passing for a zombie's or overwriting the first's (GC then
follows a lake that is not the one holding the data). What must happen instead: the second job
fails that table alone, naming the other job and the way out, writes nothing of it, commits its
other tables; the first job goes on and its lake equals the store row by row; after the operator
drops the report (the hand-over) the second job takes the table on and the first one fails it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.config import write_conf
from tests.support.oracle import TableOracle, assert_equal_to_store
from tiering.conf.loader import load_config
from tiering.delta_log.lake import Lake
from tiering.job import run_as_leader
from tiering.round.table_states import FailureCause

pytestmark = pytest.mark.integration


def _job(tmp_path: Path, name: str, kv_store, zk_hosts: str, include: list[str]) -> Path:
    """A job of its own: its name, checkpoint and lake under ``tmp_path/name``."""
    (tmp_path / name).mkdir()
    return write_conf(
        tmp_path / name / "tiering.toml",
        job=name,
        store_url=kv_store.url,
        zk_hosts=zk_hosts,
        zookeeper={"session_timeout_s": 4.0},
        trigger={"available_now": True},
        tables={"include": include},
    )


def test_a_second_job_fails_the_table_the_first_one_tiers_until_it_is_handed_over(
    spark, kv_store, zk_hosts, unique_job, tmp_path
):
    client = kv_store.client()
    shared, own = TableOracle(client, "shared", num_buckets=2), TableOracle(client, "own", num_buckets=2)
    shared.upsert(range(60))
    own.upsert(range(30))
    first_name, second_name = f"{unique_job}-first", f"{unique_job}-second"
    first = _job(tmp_path, first_name, kv_store, zk_hosts, ["shared"])
    second = _job(tmp_path, second_name, kv_store, zk_hosts, ["*"])
    first_lake, second_lake = (Lake.of(load_config(conf, {}).lake) for conf in (first, second))

    assert run_as_leader(load_config(first, {})).ok
    assert client.get_lake("shared").job == first_name

    # The first job's report reaches every log end: the second job must not settle on it.
    result = run_as_leader(load_config(second, {}))

    failure = result.failed_tables["shared"]
    assert list(result.failed_tables) == ["shared"] and failure.cause is FailureCause.STORE
    assert f"table 'shared' is tiered by job '{first_name}'" in failure.message
    assert f"job '{second_name}' writes nothing of it" in failure.message
    assert "DELETE /v1/tables/shared/lake" in failure.message
    assert second_lake.load("shared") is None, "nothing of the table written to the second lake"
    assert_equal_to_store(client, second_lake, own)
    assert client.get_lake("shared").job == first_name, "the first job's report kept"

    shared.churn(40, key_space=100)
    assert run_as_leader(load_config(first, {})).ok, "the first job still tiers and reports it"
    assert_equal_to_store(client, first_lake, shared)
    report = client.get_lake("shared")
    assert report.job == first_name and report.lake_version == first_lake.load("shared").version

    # The hand-over: the first job is told to leave the table, its report dropped.
    assert client.drop_lake("shared").job == first_name
    shared.churn(20, key_space=100)
    assert run_as_leader(load_config(second, {})).ok
    assert_equal_to_store(client, second_lake, shared)
    assert client.get_lake("shared").job == second_name

    # A first job still including it now fails it, the same way, and leaves its lake as it was.
    version = first_lake.load("shared").version
    shared.churn(10, key_space=100)
    again = run_as_leader(load_config(first, {}))
    assert f"table 'shared' is tiered by job '{second_name}'" in again.failed_tables["shared"].message
    assert first_lake.load("shared").version == version
