"""The executors' warm-up of a job over Fluss (tiering/warmup.py with the bucket reader's
``warm``): each warmed Python worker starts the gateway JVM of the one reader its round tasks
then unpickle, so a round's first read starts none, on a real Fluss cluster and local Spark.
"""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest

from tests.support.fluss import new_table
from tiering.warmup import warm_executors

pytestmark = pytest.mark.integration

fluss = pytest.importorskip("fluss")


def _java_children(pid: int) -> frozenset[int]:
    """The JVMs this process started (its children whose command is ``java``), from /proc."""
    from pathlib import Path

    children = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        children.update(int(child) for child in (task / "children").read_text().split())
    return frozenset(c for c in children if Path(f"/proc/{c}/comm").read_text().strip() == "java")


def test_a_warmed_python_worker_has_the_gateway_jvm_its_round_tasks_read_through(
    spark, fluss_cluster, database, store, caplog
):
    import asyncio

    caplog.set_level(logging.DEBUG, "tiering.warmup")
    schema = fluss.Schema(pa.schema([pa.field("id", pa.int32(), nullable=False), ("name", pa.string())]), ["id"])

    async def created() -> None:
        connection, _, _, table = await new_table(fluss_cluster, database, "warmed", schema, 2)
        writer = table.new_upsert().create_writer()
        for k in range(8):
            writer.upsert({"id": k, "name": f"n{k}"})
        await writer.flush()
        await connection.close()

    asyncio.run(created())
    table = store.table("warmed")
    ends = {b: log.end for b, log in store.log_ends(["warmed"])["warmed"].buckets.items()}
    reader = store.bucket_reader()

    warm_executors(spark, reader.warm).join()
    assert [r.getMessage() for r in caplog.records if r.name == "tiering.warmup"] == []

    def read(task: int) -> list[tuple[int, frozenset[int], frozenset[int], int]]:
        import os

        before = _java_children(os.getpid())
        bucket = task % len(ends)
        rows = sum(batch.num_rows for batch in reader.changelog(table, bucket, 0, ends[bucket]))
        snapshots = reader.java.admin.getLatestKvSnapshots(reader.java.path(database, "warmed")).get()
        assert snapshots.getTableId() == table.table_id
        return [(os.getpid(), before, _java_children(os.getpid()), rows)]

    tasks = 4
    read_in_tasks = spark.sparkContext.parallelize(range(tasks), tasks).flatMap(read).collect()

    assert [(pid, after - before) for pid, before, after, _ in read_in_tasks] == [
        (pid, frozenset()) for pid, _, _, _ in read_in_tasks
    ]
    assert all(before for _, before, _, _ in read_in_tasks)
    assert sum(rows for _, _, _, rows in read_in_tasks) == tasks // len(ends) * 8
