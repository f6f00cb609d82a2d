"""What the alert rules, their promtool tests and the Grafana dashboard name: metrics and labels.

Failure mode this exists for: an alert that can never fire because it names a series no driver
exports (a renamed metric, a `_total` left off, a label that is not there). PromQL is read
loosely: ``kv_tiering_*`` names, the label names of their ``{...}`` matchers, of ``by``/
``without``/``on``/``ignoring``/``group_*`` clauses, and of ``$labels.x``/``{{x}}`` templates.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.support.drivers import REPO

MONITORING = REPO / "deploy" / "monitoring"
RULE_FILES = sorted((MONITORING / "rules").glob("*.yml"))
RULE_TESTS = sorted((MONITORING / "tests").glob("*.yml"))
DASHBOARDS = sorted((MONITORING / "grafana").glob("*.json"))

#: labels Prometheus adds to every scraped series (with honor_labels, `job` is the driver's own)
SCRAPE_LABELS = {"instance"}

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_METRIC = re.compile(r"\b(kv_tiering_\w+)\s*(?:\{([^}]*)\})?")
_MATCHER = re.compile(r"(\w+)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_TEMPLATE = re.compile(r"\$labels\.(\w+)|\{\{\s*(\w+)\s*\}\}")


@dataclass
class Expression:
    """One PromQL expression and where it is (for the failure message)."""

    where: str
    expr: str
    templates: list[str] = field(default_factory=list)  # annotations, legend formats

    def metrics(self) -> dict[str, set[str]]:
        """Each ``kv_tiering_*`` name with the labels its own matchers name."""
        out: dict[str, set[str]] = {}
        for name, matchers in _METRIC.findall(_STRING.sub('""', self.expr)):
            out.setdefault(name, set()).update(_MATCHER.findall(matchers))
        return out

    def grouping_labels(self) -> set[str]:
        found = _GROUPING.findall(_STRING.sub('""', self.expr))
        return {label.strip() for clause in found for label in clause.split(",") if label.strip()}

    def template_labels(self) -> set[str]:
        return {a or b for text in self.templates for a, b in _TEMPLATE.findall(text)}


def rule_expressions() -> list[Expression]:
    out = []
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                name = rule.get("alert") or rule.get("record")
                out.append(Expression(f"{path.name}: {name}", rule["expr"], list(rule.get("annotations", {}).values())))
    return out


def dashboard_expressions() -> list[Expression]:
    out = []
    for path in DASHBOARDS:
        board = json.loads(path.read_text())
        for panel in board["panels"]:
            for target in panel.get("targets", []):
                out.append(
                    Expression(
                        f"{path.name}: panel {panel['title']!r}", target["expr"], [target.get("legendFormat", "")]
                    )
                )
        for variable in board.get("templating", {}).get("list", []):
            if variable.get("type") == "query":
                out.append(Expression(f"{path.name}: variable {variable['name']}", variable["definition"]))
    return out


def input_series() -> list[tuple[str, str, set[str]]]:
    """``(where, metric, labels)`` of every input series of the promtool tests."""
    out = []
    for path in RULE_TESTS:
        for test in yaml.safe_load(path.read_text())["tests"]:
            for item in test["input_series"]:
                name, _, rest = item["series"].partition("{")
                labels = set(_MATCHER.findall(_STRING.sub('""', rest)))
                out.append((f"{path.name}: {test['name']!r}", name.strip(), labels))
    return out


def promtool() -> str | None:
    """promtool on PATH, or where scripts/setup.sh puts it (beside this interpreter)."""
    beside = Path(sys.executable).parent / "promtool"
    return shutil.which("promtool") or (str(beside) if beside.exists() else None)
