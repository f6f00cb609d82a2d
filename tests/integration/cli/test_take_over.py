"""`tiering take-over` against a real store and ZooKeeper: a table another job holds is handed to
this job only when that job is not led (or with --force), and only its lake report is dropped."""

from __future__ import annotations

import threading

import pytest

from tests.support.config import make_config, write_conf
from tests.support.drivers import tiering_cli
from tests.support.fault_proxy import FaultProxy, Hold, Rule
from tests.support.store import orders_spec
from tiering.cli import EXIT_FAILURE, EXIT_OK
from tiering.coord.leader import acquire_leadership
from tiering.errors import TieringError
from tiering.kvstore.models import LakeReport
from tiering.ops.writes import take_over

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


def test_a_holder_reporting_between_the_check_and_the_drop_keeps_its_report(kv_store, zk_server, unique_job, tmp_path):
    """The holder's new term reports while take-over's drop is on its way (held at a proxy): the
    drop names the report take-over checked, so the fresh one is kept and take-over says why."""
    client = kv_store.client()
    info = client.create_table(orders_spec(num_buckets=2))
    client.upsert("orders", [{"id": i, "amount": 1.0} for i in range(10)])
    ends = {str(b.bucket): b.log_end_offset for b in client.log_info("orders").buckets}
    holder = f"{unique_job}-a"
    client.report_lake("orders", LakeReport(table_id=info.table_id, epoch=3, lake_version=5, buckets=ends, job=holder))
    fresh = LakeReport(table_id=info.table_id, epoch=4, lake_version=6, buckets=ends, job=holder)
    outcome: list[object] = []
    with FaultProxy(kv_store.url) as proxy:
        drop = Hold()
        proxy.add(Rule(drop, method="DELETE", path=r"/v1/tables/orders/lake"))
        config = make_config(tmp_path, proxy.url, zk_server.hosts, job=f"{unique_job}-b")

        def take() -> None:
            try:
                outcome.append(take_over(config, "orders", timeout_s=10))
            except TieringError as e:
                outcome.append(e)

        taking = threading.Thread(target=take, daemon=True)
        taking.start()
        drop.wait_arrived()
        client.report_lake("orders", fresh)
        drop.release()
        taking.join(60)

    assert client.get_lake("orders") == fresh, "the holder's fresh report is kept"
    assert len(outcome) == 1 and isinstance(outcome[0], TieringError), outcome
    assert all(part in str(outcome[0]) for part in ("'orders'", f"job {holder!r}", "reported", "epoch 4")), outcome
