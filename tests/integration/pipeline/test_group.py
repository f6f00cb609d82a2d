"""A tiering group on real processes: the store, ZooKeeper, local Spark and Delta (docs/DESIGN.md §7).

What is looked for: a member tiers only the tables the group gave it, each under a table epoch
that its report and its Delta commits carry (the commits under the group's name, so that the
txn versions order every owner's); a member that lost a table is refused where it writes — its
Delta commit before it lands, its report at the store — and fails that table alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tests.support.config import make_config, write_conf
from tests.support.drivers import tiering_cli
from tests.support.oracle import TableOracle, assert_equal_to_store
from tiering.conf.model import TablesConfig
from tiering.coord.epoch import bump_epoch
from tiering.coord.group import GroupMember
from tiering.coord.table_epochs import bump_table_epoch, read_table_epochs
from tiering.delta_log.commits import fence_epoch
from tiering.delta_log.lake import Lake
from tiering.delta_log.layout import app_id, epoch_round
from tiering.errors import UsageError
from tiering.job import maintain_as_leader, run_as_leader
from tiering.ops.status import job_status
from tiering.round.table_states import FailureCause
from tiering.writers.table_fence import fence_table

pytestmark = pytest.mark.integration


def test_a_member_tiers_what_it_owns_under_table_epochs_and_a_moved_table_is_refused(
    spark, kv_store, zk_hosts, unique_job, tmp_path: Path
):
    client = kv_store.client()
    tables = [TableOracle(client, f"g{i}", num_buckets=2) for i in range(3)]
    for table in tables:
        table.upsert(range(40))
    group = f"{unique_job}-g"
    config = make_config(tmp_path, kv_store.url, zk_hosts, job=unique_job, **{"job.group": group})
    lake = Lake.of(config.lake)

    assert run_as_leader(config).ok  # a group of one: it owns every table
    assert_equal_to_store(client, lake, *tables)
    zk = KazooClient(hosts=zk_hosts, timeout=4.0)
    zk.start(timeout=10)
    try:
        owners = read_table_epochs(zk, group, [t.name for t in tables])
        assert {t: (o.job, o.epoch) for t, o in owners.items()} == {t.name: (unique_job, 1) for t in tables}
        for table in tables:
            report = client.get_lake(table.name)
            assert (report.job, report.group, report.table_epoch) == (unique_job, group, 1)
            txn = lake.load(table.name).transaction_version(app_id(f"group:{group}", table.name))
            assert txn is not None and epoch_round(txn)[0] == 1, "the commit's txn version is the table epoch's"

        shown = job_status(config, timeout_s=10).as_dict()["group"]
        assert shown == {
            "group": group,
            "members": [],  # no member runs now
            "owners": {t.name: {"job": unique_job, "table_epoch": 1} for t in tables},
        }

        # Another member takes g0 (its table epoch bumped to 2) and tiers it up to here.
        other = f"{unique_job}-other"
        taken = bump_table_epoch(zk, group, "g0", other, bump_epoch(zk, other))
        assert taken.epoch == 2
    finally:
        zk.stop()
        zk.close()
    for table in tables:
        table.churn(10, key_space=60)
    # This member's next term takes every table again (the other is no member): g0 at epoch 3.
    result = run_as_leader(config)
    assert result.ok, result.failed_tables
    assert_equal_to_store(client, lake, *tables)
    assert client.get_lake("g0").table_epoch == 3
    assert fence_epoch(lake.load("g0").dt, f"group:{group}") == 3, "the new owner fenced the table before its round"

    with pytest.raises(UsageError, match="tiering group"):
        maintain_as_leader(config)


def test_a_job_joins_and_leaves_a_group_across_each_others_fences(
    spark, kv_store, zk_hosts, unique_job, tmp_path: Path
):
    client = kv_store.client()
    table = TableOracle(client, "fenced", num_buckets=2)
    table.upsert(range(40))
    alone = make_config(tmp_path, kv_store.url, zk_hosts, job=unique_job)
    lake = Lake.of(alone.lake)
    assert run_as_leader(alone).ok
    zk = KazooClient(hosts=zk_hosts, timeout=4.0)
    zk.start(timeout=10)
    try:  # the job has had terms up to 12
        while bump_epoch(zk, unique_job).value < 12:
            pass
    finally:
        zk.stop()
        zk.close()
    # a maintenance pass of the job's term 12 compacted the table: its fence, at the job's epoch
    fence_table(lake.load(table.name).dt, table.name, writer=unique_job, epoch=12)
    table.churn(10, key_space=60)
    group = f"{unique_job}-g"

    grouped = make_config(tmp_path, kv_store.url, zk_hosts, job=unique_job, **{"job.group": group})
    result = run_as_leader(grouped)

    assert result.ok, result.failed_tables  # the job's fence, in job epochs, does not make the table "moved"
    assert_equal_to_store(client, lake, table)
    assert client.get_lake(table.name).table_epoch == 1
    dt = lake.load(table.name).dt
    assert (fence_epoch(dt, unique_job), fence_epoch(dt, f"group:{group}")) == (12, 1)

    # The table went round the group up to table epoch 50; the job leaves the group and tiers it
    # alone at its job epoch: the group's fence is in table epochs, and refuses none of its rounds.
    fence_table(dt, table.name, writer=f"group:{group}", epoch=50)
    table.churn(10, key_space=60)
    alone_again = run_as_leader(alone)
    assert alone_again.ok, alone_again.failed_tables
    assert_equal_to_store(client, lake, table)

    # Back in the group, which gives the table epoch 2 while the group's fence says 50 (say its
    # table epochs were lost with ZooKeeper's data): the member owns the table and every round of
    # it is refused as "moved". That is a failure of the run and of the table, not a hand-over.
    table.churn(10, key_space=60)
    stuck = run_as_leader(grouped)
    assert stuck.failed_tables[table.name].cause is FailureCause.MOVED
    shown = {t.table: t for t in job_status(grouped, timeout_s=10).tables}[table.name]
    assert (shown.state, shown.last_failure_cause) == ("failing", "moved")
    assert shown.consecutive_failures >= 1


def test_a_member_selecting_other_tables_is_refused_at_start_exit_2(kv_store, zk_hosts, unique_job, tmp_path: Path):
    group = f"{unique_job}-g"
    zk = KazooClient(hosts=zk_hosts, timeout=4.0)
    zk.start(timeout=10)
    try:
        first = f"{unique_job}-first"
        GroupMember(zk, group, first, bump_epoch(zk, first), TablesConfig(include=["orders*"])).join()
        conf = write_conf(
            tmp_path / "tiering.toml",
            job=unique_job,
            store_url=kv_store.url,
            zk_hosts=zk_hosts,
            group=group,
            tables={"include": ["*"]},
        )
        refused = tiering_cli("run", "--conf", str(conf))
    finally:
        zk.stop()
        zk.close()
    assert refused.returncode == 2, refused.stderr
    assert all(part in refused.stderr for part in (f"job '{unique_job}'", f"job '{first}'", "'orders*'", "'*'"))
