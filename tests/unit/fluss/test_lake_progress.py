"""The Fluss lake report's setting and what it does without a cluster: off by default, refused
for the reference store, each table's failure returned, a stale epoch refused in the process."""

from __future__ import annotations

import pytest

from tiering.conf.loader import load_config
from tiering.context import planning_store
from tiering.errors import ConfigError, FencedEpochError, StoreError
from tiering.fluss.lake_progress import FlussLakeProgress
from tiering.kvstore.contract import LakeProgress


def _config(tmp_path, **settings: object):
    return load_config(
        None,
        {},
        {
            "job.name": "orders-job",
            "job.checkpoint": str(tmp_path / "ckpt"),
            "zookeeper.hosts": "127.0.0.1:1",
            "lake.root": str(tmp_path / "lake"),
            **settings,
        },
    )


FLUSS = {"kvstore.kind": "fluss", "kvstore.bootstrap_servers": "127.0.0.1:1", "kvstore.database": "shop"}


def test_the_report_is_off_by_default_on_when_asked_and_refused_for_the_reference_store(tmp_path):
    assert planning_store(_config(tmp_path, **FLUSS)).lake_progress is None
    store = planning_store(_config(tmp_path, **FLUSS, **{"kvstore.report_lake_progress": "true"}))
    assert isinstance(store.lake_progress, FlussLakeProgress)

    with pytest.raises(ConfigError) as refused:
        _config(tmp_path, **{"kvstore.url": "http://127.0.0.1:1", "kvstore.report_lake_progress": "true"})
    assert "kvstore.report_lake_progress" in str(refused.value) and "not a setting of kind = 'http'" in str(
        refused.value
    )


def test_a_report_that_fails_is_each_tables_error_and_a_lower_epoch_after_it_is_refused(tmp_path):
    store = planning_store(_config(tmp_path, **FLUSS, **{"kvstore.report_lake_progress": "true"}))
    progress = store.lake_progress
    assert progress is not None

    # no SparkContext and no fluss-client jar: no JVM to report through, and nothing raised
    answers = progress.report({"orders": LakeProgress(7, 3, 12, {0: 40, 1: 2})})
    assert list(answers) == ["orders"]
    error = answers["orders"]
    assert isinstance(error, StoreError) and error.table == "orders" and "no JVM with Fluss's client" in error.message

    with pytest.raises(FencedEpochError):
        progress.report({"orders": LakeProgress(7, 2, 11, {0: 30, 1: 2})})
    assert progress.report({}) == {}
