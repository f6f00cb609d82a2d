"""The leader loop against a real ZooKeeper (tiering.job.leader): what happens before a term
starts, without a Spark query.

- a lake root that cannot be used is refused before the job even queues for leadership;
- a standby told to stop while it waits leaves the queue and returns an empty result.
"""

from __future__ import annotations

import threading

import pytest

from tests.support.config import make_config
from tests.support.running import in_thread
from tests.support.waiting import wait_until
from tiering.coord import acquire_leadership, read_status
from tiering.errors import LakeStorageError
from tiering.job import JobResult, run_as_leader

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
