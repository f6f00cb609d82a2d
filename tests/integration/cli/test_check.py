"""`tiering check` against a real ZooKeeper and the real store process, and what an operator
command prints when one of them is down: one clear line, no library logs."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support.config import write_conf
from tests.support.drivers import tiering_cli
from tests.support.oracle import TableOracle
from tiering.cli import EXIT_FAILURE, EXIT_OK
from tiering.coord import acquire_leadership
from tiering.ports import free_port

pytestmark = pytest.mark.integration


def verdicts(result: subprocess.CompletedProcess) -> dict[str, str]:
    """``{name: "ok" | "FAILED"}`` from the command's lines."""
    return {line.split()[1]: line.split()[0] for line in result.stdout.splitlines()}


def test_all_dependencies_pass(kv_store, zk_server, unique_job, tmp_path):
    TableOracle(kv_store.client(), "orders", num_buckets=1)
    (tmp_path / "lake").mkdir()
    conf = write_conf(tmp_path / "tiering.toml", job=unique_job, store_url=kv_store.url, zk_hosts=zk_server.hosts)

    result = tiering_cli("check", "--conf", str(conf))

    assert result.returncode == EXIT_OK, result.stdout + result.stderr
    assert verdicts(result) == dict.fromkeys(["zookeeper", "kvstore", "lake", "checkpoint"], "ok")
    assert f"{kv_store.url}: healthy, API version 1; 1 of 1 tables selected (orders)" in result.stdout
    assert "conditional put" in result.stdout
    assert list((tmp_path / "lake").iterdir()) == [], "the probe table is gone"
    assert not (tmp_path / "ckpt").exists()
    probe = (
        f"import sys\nfrom tiering.cli import main\n"
        f"print(main(['check', '--conf', {str(conf)!r}]), 'pyspark' in sys.modules)"
    )
    without_jvm = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert without_jvm.stdout.splitlines()[-1] == "0 False", "a check needs no JVM: " + without_jvm.stderr[-2000:]


def test_a_job_that_has_led_shows_its_epoch_and_leader(kv_store, zk_server, unique_job, tmp_path):
    TableOracle(kv_store.client(), "orders", num_buckets=1)
    conf = write_conf(tmp_path / "tiering.toml", job=unique_job, store_url=kv_store.url, zk_hosts=zk_server.hosts)
    with acquire_leadership(zk_server.hosts, unique_job, 5.0, timeout_s=10) as term:
        result = tiering_cli("check", "--conf", str(conf))

    assert result.returncode == EXIT_OK, result.stdout + result.stderr
    line = next(line for line in result.stdout.splitlines() if line.split()[1] == "zookeeper")
    assert f"epoch {term.epoch}, leader " in line and "leader none" not in line


@pytest.mark.parametrize(
    ("auth", "verdict", "says"),
    [
        ({"auth_user": "tiering", "auth_password": "s3cret"}, "ok", "writable as 'tiering'"),
        ({"auth_user": "tiering", "auth_password": "wrong"}, "FAILED", "zookeeper.auth_user 'tiering' with the"),
        ({"auth_user": "someone", "auth_password": "s3cret"}, "FAILED", "writable only by digest user 'tiering'"),
        ({}, "FAILED", "set zookeeper.auth_user and zookeeper.auth_password"),
    ],
    ids=["right", "wrong-password", "other-user", "none"],
)
def test_the_zookeeper_check_tells_whether_the_credentials_may_write_the_job(
    kv_store, zk_server, unique_job, tmp_path, auth, verdict, says
):
    TableOracle(kv_store.client(), "orders", num_buckets=1)
    (tmp_path / "lake").mkdir()
    with acquire_leadership(zk_server.hosts, unique_job, 5.0, auth=("tiering", "s3cret"), timeout_s=10):
        pass  # the job's znodes now carry its digest ACL, as after a run with auth
    conf = write_conf(
        tmp_path / "tiering.toml", job=unique_job, store_url=kv_store.url, zk_hosts=zk_server.hosts, zookeeper=auth
    )

    result = tiering_cli("check", "--conf", str(conf))

    assert verdicts(result)["zookeeper"] == verdict, result.stdout + result.stderr
    line = next(line for line in result.stdout.splitlines() if line.split()[1] == "zookeeper")
    assert says in line and "s3cret" not in result.stdout + result.stderr
    assert verdicts(result)["kvstore"] == "ok", "the other checks still run"
    assert result.returncode == (EXIT_OK if verdict == "ok" else EXIT_FAILURE)


def test_a_stopped_store_fails_its_check_and_only_it(store_factory, zk_server, unique_job, tmp_path):
    store = store_factory()
    conf = write_conf(tmp_path / "tiering.toml", job=unique_job, store_url=store.url, zk_hosts=zk_server.hosts)
    store.stop()

    result = tiering_cli("check", "--conf", str(conf))

    assert result.returncode == EXIT_FAILURE
    assert verdicts(result) == {"zookeeper": "ok", "kvstore": "FAILED", "lake": "ok", "checkpoint": "ok"}
    assert result.stderr.splitlines() == [
        f"tiering: check failed: kvstore: KV store at {store.url} unreachable: "
        "ConnectionError: [Errno 111] Connection refused"
    ]


def test_a_stopped_zookeeper_is_named_first(kv_store, zk_factory, unique_job, tmp_path):
    TableOracle(kv_store.client(), "orders", num_buckets=1)
    zk = zk_factory()
    conf = write_conf(tmp_path / "tiering.toml", job=unique_job, store_url=kv_store.url, zk_hosts=zk.hosts)
    zk.stop()

    result = tiering_cli("check", "--conf", str(conf), "--timeout", "3")

    assert result.returncode == EXIT_FAILURE
    assert verdicts(result) == {"zookeeper": "FAILED", "kvstore": "ok", "lake": "ok", "checkpoint": "ok"}
    assert result.stderr.splitlines() == [
        f"tiering: check failed: zookeeper: cannot connect to ZooKeeper at {zk.hosts} within 3s"
    ]


def test_an_include_pattern_that_matches_no_table_is_named_with_what_the_store_has(
    kv_store, zk_server, unique_job, tmp_path
):
    for name in ("orders", "payments"):
        TableOracle(kv_store.client(), name, num_buckets=1)
    conf = write_conf(
        tmp_path / "tiering.toml",
        job=unique_job,
        store_url=kv_store.url,
        zk_hosts=zk_server.hosts,
        tables={"include": ["orders", "paymnets"]},
    )

    result = tiering_cli("check", "--conf", str(conf))

    assert result.returncode == EXIT_FAILURE, result.stdout + result.stderr
    assert verdicts(result) == {"zookeeper": "ok", "kvstore": "FAILED", "lake": "ok", "checkpoint": "ok"}
    assert result.stderr.splitlines() == [
        "tiering: check failed: kvstore: invalid configuration: tables.include: 'paymnets' matches no table "
        f"in the store at {kv_store.url}, which has 2: orders, payments"
    ]


def test_status_with_zookeeper_down_prints_one_line_and_no_kazoo_logs(kv_store, unique_job, tmp_path):
    hosts = f"127.0.0.1:{free_port()}"
    conf = write_conf(tmp_path / "tiering.toml", job=unique_job, store_url=kv_store.url, zk_hosts=hosts)

    with ThreadPoolExecutor(2) as pool:  # side by side: each waits out the connect timeout
        runs = [
            pool.submit(tiering_cli, "status", "--conf", str(conf), *flags) for flags in ([], ["--log-level", "DEBUG"])
        ]
        quiet, debug = (run.result() for run in runs)

    assert quiet.returncode == EXIT_FAILURE
    assert quiet.stderr.splitlines() == [f"tiering: cannot connect to ZooKeeper at {hosts} within 10s"]
    assert debug.returncode == EXIT_FAILURE
    assert "kazoo.client" in debug.stderr, "at DEBUG the library's reconnects are shown"


def test_leases_list_with_the_store_down_prints_no_retry_lines(store_factory, zk_server, unique_job, tmp_path):
    store = store_factory()
    conf = write_conf(tmp_path / "tiering.toml", job=unique_job, store_url=store.url, zk_hosts=zk_server.hosts)
    store.stop()

    result = tiering_cli("leases", "list", "--conf", str(conf), "--json")

    assert result.returncode == EXIT_FAILURE
    assert result.stderr.splitlines() == [
        f"tiering: KV store at {store.url} unreachable: ConnectionError: [Errno 111] Connection refused "
        "(GET /v1/leases)"
    ], "one line naming the cause, not urllib3's connection-pool text"
    assert '"kind": "StoreUnavailableError"' in result.stdout


def test_an_s3_lake_takes_the_conditional_put_probe_and_a_missing_bucket_fails(
    kv_store, zk_server, s3_server, s3_root, unique_job, tmp_path
):
    TableOracle(kv_store.client(), "orders", num_buckets=1)
    storage = s3_server.storage_options()
    conf = write_conf(
        tmp_path / "tiering.toml",
        job=unique_job,
        store_url=kv_store.url,
        zk_hosts=zk_server.hosts,
        lake_root=s3_root,
        lake={"storage": storage},
    )

    result = tiering_cli("check", "--conf", str(conf))
    assert result.returncode == EXIT_OK, result.stdout + result.stderr
    assert f"ok     lake       {s3_root}: writable, a second commit of one Delta version is refused" in result.stdout

    missing = write_conf(
        tmp_path / "missing.toml",
        job=unique_job,
        store_url=kv_store.url,
        zk_hosts=zk_server.hosts,
        lake_root="s3://no-such-bucket-for-check/lake",
        lake={"storage": storage},
    )
    refused = tiering_cli("check", "--conf", str(missing))
    assert refused.returncode == EXIT_FAILURE
    assert verdicts(refused)["lake"] == "FAILED"
    assert refused.stderr.splitlines() == [
        "tiering: check failed: lake: lake root 's3://no-such-bucket-for-check/lake': "
        "bucket 'no-such-bucket-for-check' does not exist"
    ]
