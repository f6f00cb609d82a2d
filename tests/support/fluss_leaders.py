"""Which tablet server leads each bucket of a Fluss table, and under which leader epoch, read from
the cluster's ZooKeeper.

A restarted tablet server registers itself before the coordinator has made its replicas lead their
buckets again: a write in between meets no leader (the client retries it, or hangs on it), and a
row the replica acknowledged before it first became a follower is truncated away when it does. A
test that writes after a restart waits, with a deadline, for every bucket to be led under a leader
epoch newer than the one before the restart (:func:`wait_led_anew`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

from kazoo.client import KazooClient

from tests.support.waiting import wait_until

#: Fluss's ZooKeeper layout (its ZkData): a table's registration names its id; each bucket's
#: leader_isr node holds its leader and leader epoch
_TABLE = "/fluss/metadata/databases/{database}/tables/{table}"
_BUCKETS = "/fluss/tabletservers/tables/{table_id}/buckets"
#: no tablet server leads the bucket
NO_LEADER = -1


@contextmanager
def _zookeeper(cluster) -> Iterator[KazooClient]:
    zookeeper = KazooClient(hosts=cluster.zookeeper_address, timeout=10.0)
    zookeeper.start(timeout=10.0)
    try:
        yield zookeeper
    finally:
        zookeeper.stop()
        zookeeper.close()


def bucket_leaders(cluster, database: str, table: str) -> dict[int, tuple[int, int]]:
    """Each bucket of ``database.table`` on ``cluster`` (a FlussCluster): (leader, leader epoch)."""
    with _zookeeper(cluster) as zookeeper:
        registration, _ = zookeeper.get(_TABLE.format(database=database, table=table))
        buckets = _BUCKETS.format(table_id=json.loads(registration)["table_id"])
        leaders = {}
        for bucket in zookeeper.get_children(buckets):
            node, _ = zookeeper.get(f"{buckets}/{bucket}/leader_isr")
            state = json.loads(node)
            leaders[int(bucket)] = (state["leader"], state["leader_epoch"])
        return leaders


def wait_led_anew(
    cluster, database: str, table: str, before: dict[int, tuple[int, int]], timeout_s: float = 60.0
) -> dict[int, tuple[int, int]]:
    """Wait until every bucket in ``before`` has a leader under a newer leader epoch; return them."""

    def led() -> dict[int, tuple[int, int]] | None:
        now = bucket_leaders(cluster, database, table)
        fresh = all(
            bucket in now and now[bucket][0] != NO_LEADER and now[bucket][1] > epoch
            for bucket, (_, epoch) in before.items()
        )
        return now if fresh else None

    return wait_until(
        led, f"every bucket of {database}.{table} led under a newer epoch than {before}", timeout_s=timeout_s
    )
