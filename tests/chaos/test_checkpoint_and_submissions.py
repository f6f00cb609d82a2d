"""A damaged or moved checkpoint, and the same job submitted twice at once.

- Spark's checkpoint loses its last ``commits/N`` (the batch is replayed) or its last batch
  entirely (the batch is planned again, differently): the lake, not the checkpoint, says
  what is tiered, so the next run neither skips nor repeats changes. ``offsets/N`` lost while
  ``commits/N`` survived is refused by Spark; the lake stays as it was.
- The checkpoint directory is moved and the job pointed at the new path: the lease id file
  moves with it, so the job keeps its lease id instead of leaking a new lease.
- A new, empty checkpoint under a new term: rounds are planned from the lake's positions, so
  the job continues where the lake is (nothing re-applied, nothing skipped) under a new lease id.
- Two `tiering run --available-now` of one job start together (an Airflow retry racing a
  manual run): one leads, the other waits for the term, then runs; both exit 0 and the lake
  holds every row once.
"""

from __future__ import annotations

import os
import re
import shutil

import pytest
from deltalake import DeltaTable

from tests.support.config import CHAOS, make_config, write_conf
from tests.support.drivers import Driver
from tests.support.lake import assert_no_orphans
from tests.support.oracle import TableOracle, assert_lakes_equal
from tests.support.store import assert_leases_lapse
from tiering.context import TermContext
from tiering.delta_log.commits import tiering_entry
from tiering.errors import FencedEpochError, TieringError
from tiering.job import TieringJob
from tiering.state.lease_file import load_or_create_lease_id

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

SEED = int(os.environ.get("CHAOS_SEED", "6061"))


@pytest.fixture
def kv_store(emptied_kv_store):
    """The module's cases share one store, emptied of tables and leases before each."""
    return emptied_kv_store


def _last(directory) -> int:
    return max(int(n) for n in os.listdir(directory) if n.isdigit())


@pytest.fixture
def tables(kv_store):
    client = kv_store.client()
    tables = [
        TableOracle(client, "orders", num_buckets=3, seed=SEED),
        TableOracle(client, "users", num_buckets=2, seed=SEED),
    ]
    for t in tables:
        t.upsert(range(200))
        client.take_snapshots(t.name)
        t.churn(50, key_space=300)
    return tables


def _lose(ckpt, log: str, batch: int) -> None:
    (ckpt / log / str(batch)).unlink()
    (ckpt / log / f".{batch}.crc").unlink(missing_ok=True)  # a file never written has no checksum either


def _tier_twice(spark, config, tables) -> None:
    assert TieringJob(spark, TermContext.begin(config, 1)).run().ok
    for t in tables:
        t.churn(40, key_space=300)
    assert TieringJob(spark, TermContext.begin(config, 1)).run().ok
    for t in tables:
        t.churn(40, key_space=300)


@pytest.mark.parametrize("lost", [("commits",), ("offsets", "commits")])
def test_checkpoint_missing_its_last_batch_files(spark, kv_store, tables, tmp_path, lost):
    config = make_config(tmp_path, kv_store.url, "127.0.0.1:1")
    _tier_twice(spark, config, tables)
    ckpt = tmp_path / "ckpt"
    last = _last(ckpt / "offsets")
    for log in lost:
        _lose(ckpt, log, last)

    result = TieringJob(spark, TermContext.begin(config, 2)).run()

    assert result.ok, result.failed_tables
    assert_lakes_equal(tmp_path / "lake", tables)
    assert kv_store.client().list_leases() == []
    assert_no_orphans(tmp_path / "lake", tables)


def test_checkpoint_missing_an_offsets_file_its_commit_outlived_fails_cleanly(spark, kv_store, tables, tmp_path):
    """``commits/N`` without ``offsets/N`` cannot happen in order; Spark refuses such a checkpoint
    with a misleading "concurrent update" error, which the job names for what it is: the orphan
    commit entry and where it is (tiering/state/checkpoint_check.py). Nothing reaches the lake;
    removing the orphan ``commits/N`` repairs it."""
    config = make_config(tmp_path, kv_store.url, "127.0.0.1:1")
    _tier_twice(spark, config, tables)
    ckpt = tmp_path / "ckpt"
    last = _last(ckpt / "offsets")
    _lose(ckpt, "offsets", last)
    before = {t.name: DeltaTable(str(tmp_path / "lake" / t.name)).version() for t in tables}

    with pytest.raises(
        TieringError, match=rf"commits/{last} without a planned batch in offsets/.*remove the orphan commit"
    ):
        TieringJob(spark, TermContext.begin(config, 2)).run()
    assert {t.name: DeltaTable(str(tmp_path / "lake" / t.name)).version() for t in tables} == before
    assert_leases_lapse(kv_store.client())

    _lose(ckpt, "commits", last)
    assert TieringJob(spark, TermContext.begin(config, 3)).run().ok
    assert_lakes_equal(tmp_path / "lake", tables)
    assert_no_orphans(tmp_path / "lake", tables)


def test_a_failed_query_surfaces_as_a_tiering_error(spark, kv_store, tables, tmp_path):
    """A query that dies (here: a newer epoch takes the lease mid-round) must end ``run`` with a
    TieringError, which the CLI prints as one line and exits 1 on, not a Py4J traceback."""
    config = make_config(tmp_path, kv_store.url, "127.0.0.1:1")
    lease_id = load_or_create_lease_id(config.job.checkpoint, config.job.name)
    client = kv_store.client()

    def a_newer_leader_takes_the_lease() -> None:  # the round's fence, before its Delta commits
        client.acquire_lease(lease_id, epoch=5, duration_ms=60_000, snapshots=[])

    job = TieringJob(spark, TermContext.begin(config, 1), check_term=a_newer_leader_takes_the_lease)
    with pytest.raises(TieringError, match="FENCED_EPOCH|FencedEpochError"):
        job.run()
    assert job.query is not None and job.query.exception() is not None, "the query itself failed"


def test_a_term_whose_lease_a_newer_epoch_holds_fails_at_start_writing_nothing(spark, kv_store, tables, tmp_path):
    config = make_config(tmp_path, kv_store.url, "127.0.0.1:1")
    lease_id = load_or_create_lease_id(config.job.checkpoint, config.job.name)
    kv_store.client().acquire_lease(lease_id, epoch=5, duration_ms=60_000, snapshots=[])

    job = TieringJob(spark, TermContext.begin(config, 1))
    with pytest.raises(FencedEpochError, match=f"lease '{lease_id}': epoch 1 is below the current epoch 5"):
        job.run()
    assert job.query is None, "no query started"
    assert not (tmp_path / "lake").exists()
    assert kv_store.client().get_lease(lease_id).epoch == 5


def test_checkpoint_moved_to_a_new_path_keeps_its_lease_id(spark, kv_store, tables, tmp_path):
    config = make_config(tmp_path, kv_store.url, "127.0.0.1:1")
    assert TieringJob(spark, TermContext.begin(config, 1)).run().ok
    lease_id = load_or_create_lease_id(config.job.checkpoint, config.job.name)
    moved = tmp_path / "elsewhere" / "ckpt"
    moved.parent.mkdir()
    shutil.move(config.job.checkpoint, moved)
    for t in tables:
        t.churn(40, key_space=300)
    seen: list[list[str]] = []
    client = kv_store.client()
    config = make_config(tmp_path, kv_store.url, "127.0.0.1:1", **{"job.checkpoint": str(moved)})

    result = TieringJob(
        spark,
        TermContext.begin(config, 2),
        on_round=lambda o: seen.append([lease.lease_id for lease in client.list_leases()]),
    ).run()

    assert result.ok, result.failed_tables
    assert load_or_create_lease_id(str(moved), config.job.name) == lease_id
    assert all(ids in ([], [lease_id]) for ids in seen), f"a lease other than {lease_id} appeared: {seen}"
    assert_lakes_equal(tmp_path / "lake", tables)
    assert client.list_leases() == []


def test_an_empty_checkpoint_continues_from_the_lake_under_a_new_lease(spark, kv_store, tables, tmp_path):
    config = make_config(tmp_path, kv_store.url, "127.0.0.1:1")
    assert TieringJob(spark, TermContext.begin(config, 1)).run().ok
    old_lease = load_or_create_lease_id(config.job.checkpoint, config.job.name)
    versions = {t.name: DeltaTable(str(tmp_path / "lake" / t.name)).version() for t in tables}
    for t in tables:
        t.churn(40, key_space=300)
    fresh = tmp_path / "fresh-ckpt"
    config = make_config(tmp_path, kv_store.url, "127.0.0.1:1", **{"job.checkpoint": str(fresh)})

    result = TieringJob(spark, TermContext.begin(config, 2)).run()

    assert result.ok, result.failed_tables
    assert load_or_create_lease_id(str(fresh), config.job.name) != old_lease
    assert_lakes_equal(tmp_path / "lake", tables)
    for t in tables:  # changelog rounds on top of the lake, no second bootstrap of the table
        history = DeltaTable(str(tmp_path / "lake" / t.name)).history()
        rounds = [tiering_entry(h) for h in history if h["version"] > versions[t.name]]
        assert rounds and all(r is not None and r["snapshots"] == {} for r in rounds), rounds
    assert kv_store.client().list_leases() == []
    assert_no_orphans(tmp_path / "lake", tables)


def test_two_submissions_of_one_job_at_once_one_waits_both_succeed(kv_store, zk_server, tables, tmp_path):
    conf = write_conf(tmp_path / "tiering.toml", job="twice", store_url=kv_store.url, zk_hosts=zk_server.hosts, **CHAOS)
    drivers = [Driver(conf, available_now=True), Driver(conf, available_now=True)]
    codes = [d.wait(timeout_s=400) for d in drivers]

    outputs = [d.output() for d in drivers]
    assert codes == [0, 0], "\n----\n".join(o[-2000:] for o in outputs)
    epochs = sorted(int(m.group(1)) for o in outputs for m in re.finditer(r"leader with epoch=(\d+)", o))
    assert len(epochs) == 2 and epochs[0] < epochs[1], f"two terms, one after the other: {epochs}"
    assert_lakes_equal(tmp_path / "lake", tables)
    assert kv_store.client().list_leases() == []
    assert_no_orphans(tmp_path / "lake", tables)
