"""Terms of their own for one-off commands (tiering.job.one_off), against a real ZooKeeper and
store:

- `tiering maintain`'s pass is a term of its own: a larger epoch than any before, over the
  job's tables only, and the leadership given back after;
- a term of its own (maintain, resync) builds its lake once: the lake its root was checked on is
  the one its pass or its rebuild writes to.
"""

from __future__ import annotations

import pytest

from tests.support.config import make_config
from tiering.coord import acquire_leadership, read_status
from tiering.delta_log.lake import Lake
from tiering.job import maintain_as_leader, resync_as_leader
from tiering.kvstore.models import TableSpec
from tiering.ops.verify import check_table

pytestmark = pytest.mark.integration


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
