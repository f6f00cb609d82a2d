"""Every metric and label the alert rules, their unit tests and the dashboard name is one a real
driver exports: a `tiering run --metrics-port` process is scraped after it committed a table and
failed another 3 rounds in a row, so the failure series exist too; and the rules, evaluated by
promtool on that very scrape, fire the failing-table alert and nothing else.

Real ZooKeeper, store process, local Spark in the driver process; the failing table has an
incompatible Delta table where its lake table would go (a schema failure every round).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from deltalake import write_deltalake
from prometheus_client.parser import text_string_to_metric_families

from tests.support.config import SPARK_LOCAL, write_conf
from tests.support.drivers import REPO, driver_env
from tests.support.monitoring import (
    RULE_FILES,
    SCRAPE_LABELS,
    Expression,
    dashboard_expressions,
    input_series,
    promtool,
    rule_expressions,
)
from tests.support.oracle import TableOracle
from tests.support.waiting import wait_until
from tiering.ports import free_port

pytestmark = pytest.mark.integration

#: what a scrape must show before it is compared: a commit, a failure, the lease, a batch, freshness
AWAITED = [
    ("kv_tiering_table_rounds_total", {"table": "orders", "outcome": "committed"}),
    ("kv_tiering_table_failures_total", {"table": "bad", "cause": "schema"}),
    ("kv_tiering_freshness_seconds", {"table": "orders"}),
    ("kv_tiering_lease_expiry_timestamp_seconds", {}),
    ("kv_tiering_batch_duration_seconds", {}),
]


Samples = dict[str, list[tuple[dict[str, str], float]]]


def scrape(port: int) -> Samples:
    """Sample name -> its samples' labels and values, as Prometheus reads /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.setdefault(s.name, []).append((s.labels, s.value))
    return samples


def shows(samples: Samples, name: str, labels: dict[str, str]) -> bool:
    return any(all(got.get(k) == v for k, v in labels.items()) for got, _ in samples.get(name, []))


@pytest.fixture
def driver_metrics(kv_store, zk_server, unique_job, tmp_path):
    """A running driver's metrics port, once it committed ``orders`` and failed ``bad``."""
    client = kv_store.client()
    for name in ("orders", "bad"):
        table = TableOracle(client, name, num_buckets=2)
        table.upsert(range(30))
        client.take_snapshots(name)
    write_deltalake(str(tmp_path / "lake" / "bad"), pa.table({"id": pa.array(["x"]), "other": pa.array([1])}))
    conf = write_conf(
        tmp_path / "tiering.toml",
        job=unique_job,
        store_url=kv_store.url,
        zk_hosts=zk_server.hosts,
        zookeeper={"session_timeout_s": 4.0},
        trigger={"interval_s": 1.0},
        lease={"duration_s": 6.0},
        tables={"freshness_targets": {"orders": 60}},
        spark=SPARK_LOCAL,
    )
    port = free_port()
    log = tmp_path / "driver.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tiering.cli", "run", "--conf", str(conf), "--metrics-port", str(port)],
            cwd=REPO,
            env=driver_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:

        def ready():
            if proc.poll() is not None:
                raise AssertionError(f"the driver exited {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                samples = scrape(port)
            except OSError:
                return None
            failing = [
                v for labels, v in samples.get("kv_tiering_table_consecutive_failures", []) if labels["table"] == "bad"
            ]
            awaited = all(shows(samples, name, labels) for name, labels in AWAITED)
            return samples if awaited and failing and failing[0] >= 3 else None

        yield wait_until(
            ready, "a committed table and one failed 3 rounds in a row in the driver's metrics", timeout_s=240
        )
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def as_promtool_test(samples: Samples, job: str, path: Path) -> Path:
    """A promtool test holding the scrape for 10 minutes (as Prometheus stores it, `instance`
    added): of the alerts, only ``bad`` failing 3 rounds in a row fires."""
    instance = "driver:9108"
    series = [
        {
            "series": name + "{" + ", ".join(f'{k}="{v}"' for k, v in {**labels, "instance": instance}.items()) + "}",
            "values": f"{value!r}x10",
        }
        for name, got in samples.items()
        if name.startswith("kv_tiering_")
        for labels, value in got
    ]
    (failures,) = [v for labels, v in samples["kv_tiering_table_consecutive_failures"] if labels["table"] == "bad"]
    rules = {r["alert"]: r for f in RULE_FILES for g in yaml.safe_load(f.read_text())["groups"] for r in g["rules"]}
    quiet = [
        {"eval_time": "5m", "alertname": name, "exp_alerts": []} for name in rules if name != "KvTieringTableFailing"
    ]
    failing = {
        "eval_time": "5m",
        "alertname": "KvTieringTableFailing",
        "exp_alerts": [
            {
                "exp_labels": {"severity": "critical", "job": job, "instance": instance, "table": "bad"},
                "exp_annotations": {
                    "summary": f"{job}/bad: {failures:g} rounds in a row failed",
                    "description": rules["KvTieringTableFailing"]["annotations"]["description"],
                },
            }
        ],
    }
    path.write_text(
        yaml.safe_dump(
            {
                "rule_files": [str(f) for f in RULE_FILES],
                "evaluation_interval": "1m",
                "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": [failing, *quiet]}],
            }
        )
    )
    return path


def problems(expression: Expression, exported: dict[str, set[str]]) -> list[str]:
    """What ``expression`` names that the driver does not export."""
    out = []
    metrics = expression.metrics()
    for name, labels in metrics.items():
        if name not in exported:
            out.append(f"{expression.where}: metric {name} is not exported")
        elif labels - exported[name] - SCRAPE_LABELS:
            out.append(f"{expression.where}: {name} has no label(s) {sorted(labels - exported[name] - SCRAPE_LABELS)}")
    known = set().union(*(exported.get(name, set()) for name in metrics)) | SCRAPE_LABELS
    unknown = (expression.grouping_labels() | expression.template_labels()) - known
    if metrics and unknown:
        out.append(f"{expression.where}: label(s) {sorted(unknown)} are on none of {sorted(metrics)}")
    return out


def test_rules_dashboard_and_rule_tests_name_only_what_a_running_job_exports(driver_metrics, unique_job, tmp_path):
    samples = driver_metrics
    exported = {
        name: set().union(*(set(labels) for labels, _ in got))
        for name, got in samples.items()
        if name.startswith("kv_tiering_")
    }
    assert all(labels.get("job") == unique_job for name in exported for labels, _ in samples[name])

    found = [p for e in rule_expressions() + dashboard_expressions() for p in problems(e, exported)]
    for where, name, labels in input_series():
        if name == "up":  # Prometheus' own series for the scrape job
            continue
        if name not in exported:
            found.append(f"{where}: input series {name} is not exported")
        elif labels - SCRAPE_LABELS != exported[name]:
            found.append(
                f"{where}: input series {name} has labels {sorted(labels - SCRAPE_LABELS)}, "
                f"the driver exports {sorted(exported[name])}"
            )
    assert found == []

    if promtool() is not None:  # test_rules says why when it is not
        test = as_promtool_test(samples, unique_job, tmp_path / "scraped_test.yml")
        tested = subprocess.run([promtool(), "test", "rules", str(test)], capture_output=True, text=True, timeout=120)
        assert tested.returncode == 0, tested.stdout + tested.stderr

    targets = {labels["table"]: value for labels, value in samples["kv_tiering_freshness_target_seconds"]}
    assert targets == {"orders": 60.0, "bad": 300.0}, "[tables] freshness_targets, else freshness_target_s"
    assert [value for _, value in samples["kv_tiering_leader"]] == [1.0]
    ((_, duration),) = samples["kv_tiering_lease_duration_seconds"]
    ((_, expiry),) = samples["kv_tiering_lease_expiry_timestamp_seconds"]
    assert duration == 6.0 and expiry > time.time(), "renewed every 2 s: the store's expiry is ahead of now"
