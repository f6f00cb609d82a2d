"""Two drivers race a new table's first Delta commit: the leader is frozen while its commit of
version 0 is in flight, a new leader replays the round and creates the table meanwhile, then the
frozen one (a zombie now) thaws and its commit reaches the store.

The lake is on a real S3 server behind :class:`~tests.support.fault_proxy.FaultProxy`, which holds
the first ``PUT`` of ``_delta_log/00000000000000000000.json``: the zombie's commit is then exactly
between Delta's check that no table exists and its conditional put of version 0, where the race
is. The store refuses the zombie's put (the new leader's version 0 is there); nothing of the
zombie's commit may land anywhere else in the log, or every key of the bootstrap would be in the
table twice. The lake is read past the proxy and compared with the test's oracle and with a
snapshot the store takes at the end, row by row.
"""

from __future__ import annotations

import pytest

from tests.support.config import SPARK_LOCAL, write_conf
from tests.support.drivers import Driver
from tests.support.fault_proxy import FaultProxy, Hold, Rule
from tests.support.lake import tiering_commits
from tests.support.oracle import TableOracle, assert_equal_to_store
from tests.support.waiting import wait_until
from tiering.coord import read_status
from tiering.delta_log.lake import Lake

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

SESSION_S = 4.0
TABLE = "orders"
#: the conditional put of the table's version 0, through the proxy (the root is s3://lake/<prefix>)
FIRST_COMMIT = rf"^/lake/[^/]+/{TABLE}/_delta_log/0{{20}}\.json"
#: a driver's JVM start plus a round on two busy cores; a bound, never the assertion
ROUND_TIMEOUT_S = 240.0
#: S3 requests that outlast the freeze: the zombie's held put must get the store's answer, not a timeout
PATIENT_S3 = {"timeout": "600s", "retry_timeout": "600s"}


@pytest.mark.timeout(900)
def test_a_zombie_losing_a_tables_first_commit_lands_nothing(
    kv_store, zk_factory, s3_server, s3_root, unique_job, tmp_path
):
    client, zk = kv_store.client(), zk_factory()
    oracle = TableOracle(client, TABLE, num_buckets=3)
    oracle.upsert(range(200))
    client.take_snapshots(TABLE)
    lake = Lake.at(s3_root, s3_server.storage_options())  # the test reads past the proxy
    with FaultProxy(s3_server.endpoint) as proxy:
        hold = proxy.add(Rule(Hold(), method="PUT", path=FIRST_COMMIT, times=1)).action
        conf = write_conf(
            tmp_path / "tiering.toml",
            job=unique_job,
            store_url=kv_store.url,
            zk_hosts=zk.hosts,
            lake_root=s3_root,
            lake={"storage": {**s3_server.storage_options(), "AWS_ENDPOINT_URL": proxy.url, **PATIENT_S3}},
            zookeeper={"session_timeout_s": SESSION_S},
            trigger={"available_now": False, "interval_s": 1.0},
            lease={"duration_s": 120.0},
            spark={**SPARK_LOCAL, "spark.driver.memory": "512m"},
        )
        zombie = Driver(conf, tmp_path / "zombie.log")
        leader: Driver | None = None
        try:
            hold.wait_arrived(ROUND_TIMEOUT_S)
            zombie.freeze()  # its commit of version 0 waits in the proxy; its session expires
            leader = Driver(conf, tmp_path / "leader.log")
            wait_until(lambda: tiering_commits(lake, TABLE), timeout_s=ROUND_TIMEOUT_S, what="the new leader's commit")
            epoch = read_status(zk.hosts, unique_job).epoch
            assert [c.epoch for c in tiering_commits(lake, TABLE)] == [epoch], "the new leader created the table"

            hold.release()  # the store answers the zombie's put: version 0 exists
            zombie.thaw()
            zombie_rc = zombie.wait(120)
            assert zombie_rc != 0, f"the zombie exits naming its lost term:\n{zombie.tail()}"

            commits = tiering_commits(lake, TABLE)
            assert {c.epoch for c in commits} == {epoch}, (
                f"the zombie (epoch {epoch - 1}) committed beside the new leader: {commits}\n{zombie.tail()}"
            )
            assert_equal_to_store(client, lake, oracle)  # no key twice, none missing, as the store holds them
            assert leader.proc.poll() is None, f"the new leader tiers on:\n{leader.tail()}"
        finally:
            zombie.reap()
            if leader is not None:
                leader.reap()
