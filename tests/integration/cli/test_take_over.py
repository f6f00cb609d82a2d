"""`tiering take-over` against a real store and ZooKeeper: a table another job holds is handed to
this job only when that job is not led (or with --force), and only its lake report is dropped."""

from __future__ import annotations

import pytest

from tests.support.config import write_conf
from tests.support.drivers import tiering_cli
from tests.support.store import orders_spec
from tiering.cli import EXIT_FAILURE, EXIT_OK
from tiering.coord.leader import acquire_leadership
from tiering.kvstore.models import LakeReport

pytestmark = pytest.mark.integration


def test_take_over_drops_the_holders_report_only_when_it_is_not_led_or_forced(
    kv_store, zk_server, unique_job, tmp_path
):
    client = kv_store.client()
    info = client.create_table(orders_spec(num_buckets=2))
    client.upsert("orders", [{"id": i, "amount": 1.0} for i in range(10)])
    ends = {str(b.bucket): b.log_end_offset for b in client.log_info("orders").buckets}
    holder, taker = f"{unique_job}-a", f"{unique_job}-b"
    held = LakeReport(table_id=info.table_id, epoch=3, lake_version=5, buckets=ends, job=holder)
    client.report_lake("orders", held)
    conf = write_conf(tmp_path / "b.toml", job=taker, store_url=kv_store.url, zk_hosts=zk_server.hosts)

    term = acquire_leadership(zk_server.hosts, holder, 10.0)
    try:
        refused = tiering_cli("take-over", "orders", "--conf", str(conf))
        assert refused.returncode == EXIT_FAILURE
        assert all(part in refused.stderr for part in ("'orders'", f"job {holder!r}", "led by", "--force"))
        assert client.get_lake("orders") == held, "nothing dropped while the holder is led"
    finally:
        term.resign()

    taken = tiering_cli("take-over", "orders", "--conf", str(conf))
    assert taken.returncode == EXIT_OK, taken.stderr
    assert f"job {holder!r}'s lake report (Delta version 5) dropped; job {taker!r}'s next round" in taken.stdout
    assert client.get_lake("orders") is None and client.lake_holders(["orders"]) == {"orders": None}

    again = tiering_cli("take-over", "orders", "--conf", str(conf))
    assert again.returncode == EXIT_OK and "no other job holds it" in again.stdout

    client.report_lake("orders", held.model_copy(update={"job": taker, "epoch": 1}))
    own = tiering_cli("take-over", "orders", "--conf", str(conf))
    assert own.returncode == EXIT_OK and "no other job holds it" in own.stdout
    assert client.lake_holders(["orders"]) == {"orders": taker}, "this job's own report is kept"

    client.drop_lake("orders")
    client.report_lake("orders", held)
    term = acquire_leadership(zk_server.hosts, holder, 10.0)
    try:
        forced = tiering_cli("take-over", "orders", "--conf", str(conf), "--force")
        assert forced.returncode == EXIT_OK, forced.stderr
        assert client.get_lake("orders") is None
    finally:
        term.resign()

    missing = tiering_cli("take-over", "nope", "--conf", str(conf))
    assert missing.returncode == EXIT_FAILURE and "table 'nope' does not exist in the store" in missing.stderr
