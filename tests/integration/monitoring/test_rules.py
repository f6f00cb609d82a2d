"""The alert rules load, and fire and stay quiet where their promtool unit tests say.

promtool comes from Debian's prometheus package (scripts/setup.sh extracts it into .venv/bin).
"""

from __future__ import annotations

import subprocess

import pytest

from tests.support.monitoring import (
    DASHBOARDS,
    MONITORING,
    RULE_FILES,
    RULE_TESTS,
    Expression,
    dashboard_expressions,
    promtool,
    rule_expressions,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        promtool() is None,
        reason="promtool not installed: scripts/setup.sh installs it (Debian's prometheus package) into .venv/bin",
    ),
]


def run_promtool(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([promtool(), *argv], cwd=MONITORING, capture_output=True, text=True, timeout=120)


def test_rules_and_the_example_config_are_valid():
    assert RULE_FILES and RULE_TESTS and DASHBOARDS
    checked = run_promtool("check", "rules", *map(str, RULE_FILES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    config = run_promtool("check", "config", "prometheus.yml")
    assert config.returncode == 0, config.stdout + config.stderr


def test_each_alert_fires_and_stays_quiet_where_its_unit_test_says():
    tested = run_promtool("test", "rules", *map(str, RULE_TESTS))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    alerts = {e.where.split(": ")[1] for e in rule_expressions()}
    named = "\n".join(path.read_text() for path in RULE_TESTS)
    assert {a for a in alerts if f"alertname: {a}" not in named} == set(), "every alert has a unit test"


def test_the_loose_promql_reader_finds_names_and_labels():
    """What test_series_exist relies on, checked on the real files and on a tricky expression."""
    e = Expression(
        "x",
        'sum by (job, table) (increase(kv_tiering_a_total{cause="a=b,c", job=~"$job"}[5m])) '
        "> on (job) group_left (table) kv_tiering_b",
        ["{{ $labels.table }} {{instance}}"],
    )
    assert e.metrics() == {"kv_tiering_a_total": {"cause", "job"}, "kv_tiering_b": set()}
    assert e.grouping_labels() == {"job", "table"}
    assert e.template_labels() == {"table", "instance"}
    assert all(e.metrics() or "up{" in e.expr for e in rule_expressions() + dashboard_expressions())
