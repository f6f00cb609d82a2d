"""The Fluss cluster launcher (tiering/fluss/cluster.py): a tablet server restarted, cleanly and
after a SIGKILL.

Failure modes looked for: a restart that returns while the cluster still lists the killed server
(its ZooKeeper registration outlives a SIGKILL until its session expires), so the next write
meets no server; a restart that loses the server's data directory or port. Rows written before
a clean restart are read back after it and after a later kill (a clean stop saved them); a
write right after the kill's restart lands. Rows acknowledged less than Fluss's high-watermark
checkpoint interval (5 s) before a SIGKILL are not looked for: with one replica Fluss truncates
its log to the last checkpoint when the restarted replica first becomes a follower. For the same
reason the write after the kill's restart waits until the coordinator has made the restarted
replica lead every bucket again (a newer leader epoch in ZooKeeper): the server registers itself
before that, and a write in between hangs or is truncated away (tests/support/fluss_leaders.py).
"""

from __future__ import annotations

import asyncio
import signal

import pyarrow as pa
import pytest

from tests.support.fluss import connect
from tests.support.fluss_leaders import bucket_leaders, wait_led_anew

pytestmark = pytest.mark.integration

fluss = pytest.importorskip("fluss")

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
PATH = ("fluss", "restarted")


async def write(cluster, keys: range, *, create: bool = False) -> None:
    connection = await connect(cluster)
    path = fluss.TablePath(*PATH)
    if create:
        schema = fluss.Schema(SCHEMA, primary_keys=["id"])
        await connection.get_admin().create_table(path, fluss.TableDescriptor(schema, bucket_count=2))
    writer = (await connection.get_table(path)).new_upsert().create_writer()
    for key in keys:
        writer.upsert({"id": key, "name": f"row-{key}"})
    await writer.flush()
    await connection.close()


async def read(cluster, keys: range) -> list:
    connection = await connect(cluster)
    lookuper = (await connection.get_table(fluss.TablePath(*PATH))).new_lookup().create_lookuper()
    rows = [await lookuper.lookup({"id": key}) for key in keys]
    await connection.close()
    return rows


def rows(keys: range) -> list[dict]:
    return [{"id": key, "name": f"row-{key}"} for key in keys]


def test_a_restarted_tablet_server_keeps_its_rows_and_serves_writes_after_a_kill(fluss_cluster_factory):
    cluster = fluss_cluster_factory()
    asyncio.run(write(cluster, range(10), create=True))

    cluster.restart_tablet()
    assert asyncio.run(read(cluster, range(10))) == rows(range(10))

    before, leaders = cluster.registration(), bucket_leaders(cluster, *PATH)
    cluster.signal_tablet(signal.SIGKILL)
    cluster.restart_tablet()
    assert cluster.registration() not in (None, before)
    wait_led_anew(cluster, *PATH, leaders)
    asyncio.run(write(cluster, range(10, 15)))
    assert asyncio.run(read(cluster, range(15))) == rows(range(15))
