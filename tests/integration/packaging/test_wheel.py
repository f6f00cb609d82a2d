"""The built wheel installed in a fresh virtualenv, away from the checkout: what a user gets from
`pip install dist/kv_tiering-*.whl` — the CLI, the example config, our Fluss snapshot reader's jar
(found in the install), the preflight check against real services and a spark-submit of the job
entry that tiers tables.

The wheel and its virtualenv are the ``installed_wheel`` fixture's (this folder's conftest). The
extras are not installed: the job and the operator commands must not need them.
"""

from __future__ import annotations

import importlib.metadata
import re
import zipfile
from pathlib import Path

import pytest

from tests.support.config import write_conf
from tests.support.oracle import TableOracle, assert_lake_equals
from tiering.cli import EXIT_OK, EXIT_USAGE
from tiering.fluss.jvm import SNAPSHOT_SOURCE_PLACES, snapshot_source_jar

pytestmark = pytest.mark.integration


def test_the_installed_cli_is_the_wheel_s_and_needs_no_extra(installed_wheel):
    print(f"wheel built and installed in a fresh virtualenv in {installed_wheel.seconds_to_install:.1f} s")
    version = installed_wheel.run("tiering", "--version")
    assert version.stdout == f"tiering {importlib.metadata.version('kv-tiering')}\n", version.stderr
    probe = installed_wheel.run(
        "python",
        "-I",
        "-c",
        "import importlib.util, tiering, tiering.cli, tiering.jobs.tiering_job; "
        "print(tiering.__file__); print(importlib.util.find_spec('fastapi') is None)",
    )
    location, no_fastapi = probe.stdout.split()
    assert Path(location).is_relative_to(installed_wheel.venv), location
    assert no_fastapi == "True", "the job's install pulled the store's web framework"
    store = installed_wheel.run("tiering", "kv-store", "serve", "--data-dir", "kv", "--port", "8420")
    assert store.returncode == EXIT_USAGE
    assert "-py3-none-any.whl[store]' beside the wheel" in store.stderr


def test_init_writes_the_example_config_and_the_alert_rules_print(installed_wheel, tmp_path):
    assert installed_wheel.run("tiering", "init", cwd=tmp_path).returncode == EXIT_OK
    assert 'name = "kv-tiering-demo"' in (tmp_path / "tiering.toml").read_text()
    rules = installed_wheel.run("tiering", "alert-rules")
    assert rules.returncode == EXIT_OK and "alert: KvTieringDriverDown" in rules.stdout
    dag = installed_wheel.run("tiering", "airflow-dag", "-")
    assert dag.returncode == EXIT_OK, dag.stderr
    application = re.search(r"^INSTALL = .*'application': '([^']+)'", dag.stdout, re.M)
    assert application and Path(application[1]).is_relative_to(installed_wheel.venv), dag.stdout[:2000]
    assert Path(application[1]).is_file(), "the DAG's spark-submit application is in the install"


def test_the_wheel_carries_our_fluss_jar_and_the_install_finds_its_own_copy(installed_wheel):
    packaged, target = SNAPSHOT_SOURCE_PLACES
    built = snapshot_source_jar([target])
    if built is None:
        pytest.skip(f"no fluss-snapshot-source jar in {target} (scripts/setup_fluss_source.sh builds it)")
    with zipfile.ZipFile(installed_wheel.wheel) as wheel:
        names = [name for name in wheel.namelist() if name.endswith(".jar")]
    assert names == [f"tiering/resources/jvm/{built.name}"], f"{names}: scripts/setup_fluss_source.sh copies it"

    probe = installed_wheel.run(
        "python",
        "-I",
        "-c",
        "import sysconfig; from tiering.fluss.jvm import snapshot_source_jar; "
        "print(sysconfig.get_paths()['purelib']); print(snapshot_source_jar())",
    )

    site_packages, found = map(Path, probe.stdout.split())
    assert site_packages.is_relative_to(installed_wheel.venv), probe.stdout + probe.stderr
    assert found == site_packages / "tiering" / "resources" / "jvm" / built.name, probe.stdout + probe.stderr
    assert found.read_bytes() == built.read_bytes(), f"{packaged}'s copy is not the build in {target}"


def test_check_passes_against_the_services(installed_wheel, kv_store, zk_server, unique_job, tmp_path):
    TableOracle(kv_store.client(), "orders", num_buckets=1)
    (tmp_path / "lake").mkdir()
    conf = write_conf(tmp_path / "tiering.toml", job=unique_job, store_url=kv_store.url, zk_hosts=zk_server.hosts)

    result = installed_wheel.run("tiering", "check", "--conf", str(conf))

    assert result.returncode == EXIT_OK, result.stdout + result.stderr
    assert [line.split()[:2] for line in result.stdout.splitlines()] == [
        ["ok", "zookeeper"],
        ["ok", "kvstore"],
        ["ok", "lake"],
        ["ok", "checkpoint"],
    ]


def test_submit_spark_submits_the_job_entry_which_tiers_a_table(
    installed_wheel, kv_store, zk_server, unique_job, tmp_path
):
    client = kv_store.client()
    orders = TableOracle(client, "orders", num_buckets=2)
    orders.upsert(range(80))
    client.take_snapshots(orders.name)
    orders.churn(30, key_space=100)
    conf = write_conf(
        tmp_path / "tiering.toml",
        job=unique_job,
        store_url=kv_store.url,
        zk_hosts=zk_server.hosts,
        spark={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
    )

    done = installed_wheel.run(
        "tiering",
        "submit",
        "--conf",
        str(conf),
        "--available-now",
        "--",
        "--master",
        "local[2]",
        cwd=tmp_path,
        timeout=300,
    )

    assert done.returncode == EXIT_OK, done.stdout[-4000:] + done.stderr[-4000:]
    # spark-submit merges the Python driver's stderr into its stdout
    [origin] = [line for line in done.stdout.splitlines() if line.startswith("tiering_job: tiering package from")]
    assert Path(origin.rsplit(" ", 1)[1]).is_relative_to(installed_wheel.venv), origin
    assert f"job {unique_job!r} done after" in done.stdout
    assert_lake_equals(tmp_path / "lake", orders)
