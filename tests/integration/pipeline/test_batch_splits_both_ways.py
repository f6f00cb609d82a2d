"""A real batch of the kv-tiering source: its offsets log and its rows give the same splits.

One short query over a real store, with a ``foreachBatch`` that reads its batch both ways: the
offsets log Spark wrote, and the batch's rows, which the round committer falls back to when a
copy of that log entry carries a version it does not know (``v99``).
"""

from __future__ import annotations

import logging

import pytest

from tests.support.config import make_config
from tests.support.oracle import TableOracle
from tests.support.waiting import wait_until
from tiering.context import TermContext
from tiering.round.batch_splits import BatchSplits, batch_splits
from tiering.source import CONTEXT_OPTION, KvTieringDataSource

pytestmark = pytest.mark.integration


def test_the_offsets_log_and_the_batch_rows_give_the_same_splits(spark, kv_store, tmp_path, caplog):
    client = kv_store.client()
    orders = TableOracle(client, "orders", num_buckets=2)
    orders.upsert(range(40))
    client.take_snapshots("orders")
    orders.upsert(range(30, 60))
    config = make_config(tmp_path, kv_store.url, "127.0.0.1:1", **{"trigger.available_now": False})
    context = TermContext.begin(config, 1)
    rewritten = tmp_path / "rewritten"
    seen: list[tuple[BatchSplits, BatchSplits]] = []

    def both_ways(batch_df, batch_id: int) -> None:
        if seen:
            return
        (rewritten / "offsets").mkdir(parents=True)
        entry = (tmp_path / "ckpt" / "offsets" / str(batch_id)).read_text().split("\n", 1)[1]
        (rewritten / "offsets" / str(batch_id)).write_text("v99\n" + entry)
        seen.append(
            (batch_splits(batch_df, batch_id, config.job.checkpoint), batch_splits(batch_df, batch_id, str(rewritten)))
        )

    caplog.set_level(logging.WARNING, logger="tiering.round.batch_splits")
    spark.dataSource.register(KvTieringDataSource)
    query = (
        spark.readStream.format(KvTieringDataSource.name())
        .option(CONTEXT_OPTION, context.to_option())
        .load()
        .writeStream.foreachBatch(both_ways)
        .option("checkpointLocation", config.job.checkpoint)
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        wait_until(lambda: seen or query.exception(), timeout_s=120, what="the first batch")
    finally:
        query.stop()
    assert query.exception() is None, query.exception()

    [(from_log, from_rows)] = seen
    assert from_log.source == "offsets log" and from_rows.source == "batch rows"
    assert {split.kind for split in from_log.splits} == {"snapshot", "log"}, from_log.splits
    assert (from_rows.round_id, from_rows.splits) == (from_log.round_id, from_log.splits)
    [warning] = [r for r in caplog.records if r.name == "tiering.round.batch_splits"]
    assert "'v99'" in warning.getMessage() and str(rewritten / "offsets") in warning.getMessage()
