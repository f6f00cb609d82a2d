"""Lake progress told to a real Apache Fluss cluster (`[kvstore] report_lake_progress`): after a
round lands, Fluss's lake snapshot of the table, read back with pyfluss
(``get_latest_lake_snapshot``), is the lake's Delta version with each bucket's log offset the lake
reached; off (the default) the job's store takes no report. A report that cannot be made, and
a stale epoch, are tests/unit/fluss/test_lake_progress.py's.
"""

from __future__ import annotations

import asyncio
import tomllib
import uuid
from pathlib import Path

import pytest
import tomli_w

from tests.support.drivers import Driver
from tests.support.fluss import connect
from tests.support.fluss_job import BUCKETS, COLUMNS, job_conf, lake_rows, row, snapshots_covering_the_log
from tiering.conf.loader import load_config
from tiering.context import planning_store
from tiering.delta_log.lake import Lake
from tiering.fluss.jvm import snapshot_source_jar

pytestmark = pytest.mark.integration

fluss = pytest.importorskip("fluss")


def _lake_snapshot(cluster, database: str, table: str) -> tuple[int, dict[int, int]] | None:
    """Fluss's latest lake snapshot of ``table``: its id and offsets by bucket; None when it has none."""

    async def read():
        connection = await connect(cluster)
        try:
            snapshot = await connection.get_admin().get_latest_lake_snapshot(fluss.TablePath(database, table))
        except fluss.FlussError as e:
            if "LakeTableSnapshotNotExist" in str(e) or "lake table snapshot" in str(e).lower():
                return None
            raise
        finally:
            await connection.close()
        return snapshot.snapshot_id, {b.bucket_id: o for b, o in snapshot.table_buckets_offset.items()}

    return asyncio.run(read())


def _reporting(conf: Path) -> Path:
    """``conf`` with the report on, and our jar beside fluss-client on ``spark.jars``."""
    settings = tomllib.loads(conf.read_text())
    settings["kvstore"]["report_lake_progress"] = True
    settings["spark"]["spark.jars"] += f",{snapshot_source_jar()}"
    conf.write_bytes(tomli_w.dumps(settings).encode())
    return conf


def test_a_landed_round_is_reported_to_fluss_only_when_asked(
    fluss_cluster, writer, store, database, zk_server, tmp_path
):
    writer.create_table("orders", COLUMNS, ["id"], BUCKETS)
    writer.upsert("orders", [row(k) for k in range(200)])
    snapshots_covering_the_log(store, "orders")
    job = f"progress-{uuid.uuid4().hex[:6]}"
    conf = job_conf(tmp_path, job, fluss_cluster.bootstrap_servers, database, zk_server.hosts)
    # off by default: the job's store takes no report, and a round then sends none (the committer's
    # unit tests); a driver run of its own would only add a Spark start to this module
    assert planning_store(load_config(conf)).lake_progress is None

    reporting = Driver(_reporting(conf), available_now=True)
    assert reporting.wait(300) == 0, reporting.tail()
    assert "lake report refused" not in reporting.output(), reporting.tail()
    assert lake_rows(tmp_path, "orders") == writer.current_rows("orders")
    lake = Lake.at(str(tmp_path / "lake")).load("orders")
    assert lake is not None
    position = lake.position()
    assert position is not None
    ends = store.log_ends(["orders"])["orders"].buckets
    assert dict(position.buckets) == {b: log.end for b, log in ends.items()}, "the lake reached every log end"
    assert _lake_snapshot(fluss_cluster, database, "orders") == (lake.version, dict(position.buckets))
