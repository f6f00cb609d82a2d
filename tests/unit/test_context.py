"""TermContext: one term's config, epoch and lease id, built once and handed on whole.

What must hold: the lease id is the checkpoint's (created by the job's first term, the same for
every later one); the context travels as one option and comes back equal, secrets included,
while nothing else it prints shows them; a malformed or partial context is a ConfigError, never
a context with defaults filled in; and every handle it builds acts for this term's epoch.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pydantic import ValidationError

from tests.support.memory_store import MemoryStore
from tests.support.tables import kv_table
from tiering.conf.loader import load_config
from tiering.context import TermContext, planning_store, store_client
from tiering.delta_log.lake import Lake
from tiering.errors import ConfigError, FencedEpochError, UsageError
from tiering.fluss.store import FlussStore
from tiering.kvstore.reference import ReferenceStore
from tiering.state.checkpoint_store import checkpoint_of
from tiering.state.lease_file import read_lease_id

pytestmark = pytest.mark.unit


def config(tmp_path, **overrides):
    return load_config(
        None,
        {},
        {
            "job.name": "orders-job",
            "job.checkpoint": str(tmp_path / "ckpt"),
            "kvstore.url": "http://127.0.0.1:1/",
            "kvstore.token": "store-s3cret",
            "zookeeper.hosts": "127.0.0.1:1",
            "zookeeper.auth_user": "tiering",
            "zookeeper.auth_password": "zk-s3cret",
            "lake.root": str(tmp_path / "lake"),
            "lease.duration_s": 2.5,
            **overrides,
        },
    )


def test_begin_takes_the_lease_id_from_the_checkpoint_and_every_later_term_reuses_it(tmp_path):
    first = TermContext.begin(config(tmp_path), 1)
    later = TermContext.begin(config(tmp_path), 7)

    assert first.lease_id == read_lease_id(str(tmp_path / "ckpt")) and first.lease_id.startswith("orders-job-")
    assert (later.epoch, later.lease_id) == (7, first.lease_id)
    assert (
        TermContext.begin(config(tmp_path, **{"job.checkpoint": str(tmp_path / "other")}), 7).lease_id != first.lease_id
    )


def test_the_option_round_trips_the_whole_context_secrets_included(tmp_path):
    context = TermContext.begin(config(tmp_path), 4)

    back = TermContext.from_option(context.to_option())

    assert back == context
    assert back.config.kvstore.token.get_secret_value() == "store-s3cret"
    assert back.config.zookeeper.auth_password.get_secret_value() == "zk-s3cret"


def test_secrets_are_in_the_option_only(tmp_path):
    context = TermContext.begin(config(tmp_path), 4)

    assert "store-s3cret" in context.to_option() and "zk-s3cret" in context.to_option()
    for shown in (repr(context), str(context), context.model_dump_json()):
        assert "store-s3cret" not in shown and "zk-s3cret" not in shown


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.pop("lease_id"),
        lambda d: d.update(lease_id=""),
        lambda d: d.update(epoch=-1),
        lambda d: d.update(epoch="4"),  # strict: no coercion of what another process sent
        lambda d: d.update(unknown=1),
        lambda d: d["config"].pop("kvstore"),
    ],
    ids=["no lease id", "empty lease id", "negative epoch", "epoch as text", "unknown field", "no store"],
)
def test_a_malformed_context_is_a_config_error_naming_the_option(tmp_path, change):
    data = json.loads(TermContext.begin(config(tmp_path), 4).to_option())
    change(data)

    with pytest.raises(ConfigError, match="kv-tiering source option: not a term context"):
        TermContext.from_option(json.dumps(data))


def test_not_json_is_a_config_error():
    with pytest.raises(ConfigError, match="not a term context"):
        TermContext.from_option("{epoch: 4")


def test_a_context_is_immutable(tmp_path):
    context = TermContext.begin(config(tmp_path), 4)

    with pytest.raises(ValidationError):
        context.epoch = 5
    assert context.epoch == 4


def test_handles_act_for_this_term(tmp_path):
    context = TermContext.begin(config(tmp_path), 9)
    store = MemoryStore([kv_table({"id": "bigint"}, name="orders")])
    ref = store.snapshot("orders", 0, 1, 10)

    lease = context.job_lease(store)
    lease.acquire([ref])

    assert context.job == "orders-job"
    assert (lease.store, lease.lease_id, lease.duration_ms) == (store, context.lease_id, 2500)
    assert store.lease_epoch(context.lease_id) == 9, "the store saw this term's epoch"
    assert store.expires_at_ms(context.lease_id) == store.now_ms + 2500, "held for lease.duration_s"
    with pytest.raises(FencedEpochError):
        TermContext.begin(config(tmp_path), 8).job_lease(store).acquire([ref])
    assert isinstance(context.lake, Lake) and context.lake == Lake.of(context.config.lake)
    assert context.lake.store.root == str(tmp_path / "lake")


def test_the_lake_and_the_checkpoint_are_built_once_per_term_and_stay_out_of_its_option(tmp_path):
    context = TermContext.begin(config(tmp_path), 9)

    assert context.lake is context.lake
    assert context.checkpoint is context.checkpoint
    assert context.checkpoint == checkpoint_of(context.config)
    assert context.checkpoint.name() == str(tmp_path / "ckpt")
    assert TermContext.from_option(context.to_option()) == context, "cached values are no fields"
    assert context.model_copy(update={"group_file": "g.json"}).lake is context.lake


def test_the_store_client_of_a_config_without_a_token_sends_none(tmp_path):
    kvstore = config(tmp_path, **{"kvstore.token": ""}).kvstore

    client = store_client(kvstore, timeout_s=3.0, retry_deadline_s=1.0)

    assert (client.url, client.token, client.timeout_s, client.retry_deadline_s) == (
        "http://127.0.0.1:1",
        None,
        3.0,
        1.0,
    )


def test_the_planning_process_logs_to_stderr_only_where_the_driver_does(tmp_path):
    """``tiering run`` logs to stderr at its --log-level; the demo logs to a file (its live display
    owns the terminal): the planning process must then print nothing there."""
    code = (
        "import logging, sys; from tiering.context import stderr_log_level; "
        "logging.basicConfig(level=sys.argv[1]) if sys.argv[1] != 'file' else "
        "logging.getLogger().addHandler(logging.FileHandler(sys.argv[2])); "
        "print(stderr_log_level())"
    )
    levels = [
        subprocess.run(
            [sys.executable, "-c", code, how, str(tmp_path / "log")], capture_output=True, text=True, timeout=60
        ).stdout.strip()
        for how in ("INFO", "WARNING", "file")
    ]
    assert levels == ["20", "30", "None"]


def test_the_terms_store_is_the_configured_kind_and_only_the_http_one_has_a_client(tmp_path):
    reference = planning_store(config(tmp_path))
    assert isinstance(reference, ReferenceStore)
    assert (reference.client.url, reference.client.token) == ("http://127.0.0.1:1", "store-s3cret")

    client_jar = "/opt/jars/fluss-client-0.9.1-incubating.jar"
    fluss = load_config(
        None,
        {},
        {
            "job.name": "orders-job",
            "job.checkpoint": str(tmp_path / "ckpt"),
            "kvstore.kind": "fluss",
            "kvstore.bootstrap_servers": "127.0.0.1:9123",
            "kvstore.database": "shop",
            "zookeeper.hosts": "127.0.0.1:1",
            "lake.root": str(tmp_path / "lake"),
            "spark.spark.jars": f"/opt/jars/fluss-snapshot-source-0.1.jar, file://{client_jar}",
        },
        settings={"kvstore.client.client.request-timeout": "60s"},
    )
    store = planning_store(fluss)
    assert isinstance(store, FlussStore)
    assert (store.bootstrap_servers, store.database, str(store.client_jar)) == ("127.0.0.1:9123", "shop", client_jar)
    assert store.options == {"client.request-timeout": "60s"} == store.bucket_reader().options
    with pytest.raises(UsageError) as refused:
        store_client(fluss.kvstore)
    assert str(refused.value).startswith("kvstore.kind = 'fluss': this command needs the reference store's HTTP API")


def test_a_term_keeps_the_lake_and_the_checkpoint_its_leader_already_built_and_checked(tmp_path):
    settings = config(tmp_path)
    lake, checkpoint = Lake.of(settings.lake), checkpoint_of(settings)

    context = TermContext.begin(settings, 9, lake=lake, checkpoint=checkpoint)

    assert context.lake is lake and context.checkpoint is checkpoint
    assert context.lease_id == TermContext.begin(settings, 10).lease_id, "the lease id is that checkpoint's"
    assert context.model_copy(update={"group_file": "g.json"}).checkpoint is checkpoint
