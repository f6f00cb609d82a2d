"""The leader loop against a real ZooKeeper and store (tiering.job): what happens before a term
starts and around one, without a Spark query where none is needed.

- a lake root that cannot be used is refused before the job even queues for leadership;
- a standby told to stop while it waits leaves the queue and returns an empty result;
- `tiering maintain`'s pass is a term of its own: a larger epoch than any before, over the
  job's tables only, and the leadership given back after;
- a term of its own (maintain, resync) builds its lake once: the lake its root was checked on is
  the one its pass or its rebuild writes to;
- the Spark settings the lake writer relies on win over the config's ``[spark]`` section.
"""

from __future__ import annotations

import threading

import pytest

from tests.support.config import make_config
from tests.support.running import in_thread
from tests.support.waiting import wait_until
from tiering.coord import acquire_leadership, read_status
from tiering.delta_log.lake import Lake
from tiering.errors import LakeStorageError
from tiering.job import (
    REQUIRED_SPARK_CONF,
    JobResult,
    build_spark,
    maintain_as_leader,
    resync_as_leader,
    run_as_leader,
)
from tiering.kvstore.models import TableSpec
from tiering.ops.verify import check_table

pytestmark = pytest.mark.integration


def test_an_unusable_lake_root_is_refused_before_the_job_queues_for_leadership(zk_hosts, unique_job, tmp_path):
    (tmp_path / "lake").write_text("a file where the lake should be")
    config = make_config(tmp_path, "http://127.0.0.1:1", zk_hosts, job=unique_job)

    with pytest.raises(LakeStorageError, match="is a file, not a directory"):
        run_as_leader(config)

    assert read_status(zk_hosts, unique_job).epoch is None, "the job never reached ZooKeeper"
    assert not (tmp_path / "ckpt").exists()


def test_a_standby_stopped_while_it_waits_leaves_the_queue_with_an_empty_result(zk_hosts, unique_job, tmp_path):
    config = make_config(tmp_path, "http://127.0.0.1:1", zk_hosts, job=unique_job)
    stop = threading.Event()
    with acquire_leadership(zk_hosts, unique_job, 5.0, timeout_s=10) as leader:
        runner, box = in_thread(lambda: run_as_leader(config, stop=stop))
        wait_until(lambda: read_status(zk_hosts, unique_job).contenders == 2, "the standby to queue", timeout_s=30)
        stop.set()
        runner.join(30)

        assert not runner.is_alive(), "the standby still waits"
        assert "error" not in box, box.get("error")
        assert box["result"] == JobResult()
        status = read_status(zk_hosts, unique_job)
        assert (status.contenders, status.epoch) == (1, leader.epoch), "it left the queue and never led"
    assert not (tmp_path / "ckpt").exists(), "a standby touches no checkpoint"


def test_maintenance_by_hand_is_a_term_of_its_own_over_the_jobs_tables(kv_store, zk_hosts, unique_job, tmp_path):
    client = kv_store.client()
    for name in ("orders", "scratch"):
        client.create_table(
            TableSpec(name=name, schema=[{"name": "id", "type": "bigint"}], primary_key=["id"], num_buckets=1)
        )
    config = make_config(tmp_path, kv_store.url, zk_hosts, job=unique_job, **{"tables.exclude": ["scratch"]})
    with acquire_leadership(zk_hosts, unique_job, 5.0, timeout_s=10) as earlier:
        pass

    result = maintain_as_leader(config)

    assert result.epoch == earlier.epoch + 1, "a larger epoch than any term before: its commits fence them"
    assert result.ok and sorted(result.done) == ["orders"], "the job's tables only"
    assert "no table tiered by job" in result.done["orders"].skipped
    status = read_status(zk_hosts, unique_job)
    assert (status.epoch, status.leader, status.contenders) == (result.epoch, None, 0), "leadership given back"


@pytest.fixture
def lakes_built(monkeypatch) -> list[Lake]:
    """Every lake ``Lake.of`` builds meanwhile (the real one, recorded)."""
    built: list[Lake] = []
    of = Lake.of.__func__

    def recorded(cls, config):
        built.append(of(cls, config))
        return built[-1]

    monkeypatch.setattr(Lake, "of", classmethod(recorded))
    return built


def test_a_term_of_its_own_builds_its_lake_once(spark, kv_store, zk_hosts, unique_job, tmp_path, lakes_built):
    client = kv_store.client()
    client.create_table(
        TableSpec(name="orders", schema=[{"name": "id", "type": "bigint"}], primary_key=["id"], num_buckets=1)
    )
    client.upsert("orders", [{"id": i} for i in range(5)])
    config = make_config(tmp_path, kv_store.url, zk_hosts, job=unique_job)

    assert maintain_as_leader(config).ok
    assert len(lakes_built) == 1, "the lake whose root was checked is the one maintained"
    lakes_built.clear()
    resync_as_leader(config, "orders")
    assert len(lakes_built) == 1, "the lake whose root was checked is the one rebuilt"
    assert check_table(client, lakes_built[0], client.get_table("orders")).equal


def test_the_spark_settings_the_writer_relies_on_win_over_the_config(spark, tmp_path):
    config = make_config(
        tmp_path,
        "http://127.0.0.1:1",
        "127.0.0.1:1",
        **{
            "spark.spark.sql.session.timeZone": "America/New_York",
            "spark.spark.kvtiering.test.marker": "set",
        },
    )
    assert config.spark["spark.sql.session.timeZone"] == "America/New_York"

    session = build_spark(config)

    assert session is spark, "an existing session is reused (spark-submit's or a test's)"
    for key, value in REQUIRED_SPARK_CONF.items():
        assert session.conf.get(key) == value
    assert session.conf.get("spark.kvtiering.test.marker") == "set", "the config's other settings are applied"
