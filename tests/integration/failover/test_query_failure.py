"""A query that fails because its term ended must surface as a TieringError, not a Spark one.

Found by the whole-job failover test: Spark's ``awaitTermination`` raises its own
``StreamingQueryException`` when the query failed while it waited; the CLI must print one
clear line, not a raw traceback.
"""

from __future__ import annotations

import pytest

from tests.support.config import make_config
from tests.support.oracle import TableOracle
from tiering.context import TermContext
from tiering.errors import LeadershipLostError, TieringError
from tiering.job import TieringJob

pytestmark = pytest.mark.integration


def superseded() -> None:
    raise LeadershipLostError("epoch 1 superseded by epoch 2 (a term check of the test)", epoch=1)


def test_a_query_stopped_by_its_term_check_fails_run_with_a_tiering_error(spark, kv_store, tmp_path):
    orders = TableOracle(kv_store.client(), "orders", num_buckets=2)
    orders.upsert(range(20))
    config = make_config(tmp_path, kv_store.url, "127.0.0.1:1")
    job = TieringJob(spark, TermContext.begin(config, 1), check_term=superseded)

    with pytest.raises(TieringError, match="superseded"):
        job.run(poll_s=30.0)  # the failure lands while run() waits in awaitTermination
    assert not (tmp_path / "lake" / "orders" / "_delta_log").exists(), "nothing committed once the term ended"
