"""The Grafana dashboard and the Prometheus alert rules use only metrics Parley exports, and
every alert has a runbook section."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import REGISTRY

import adapters.metrics
import agent.llm.metrics
import bot.conversation.limits
import bot.ops.gc_tuning
import bot.ops.metrics
import memory.metrics
from agent import outcomes

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
# Metrics other parts of the service are adding; referenced by name ahead of their merge.
UPCOMING = {"parley_dead_letters_total"}
# Series Prometheus itself provides.
PROMETHEUS = {"up"}
METRIC = re.compile(r"\b(parley_[a-z0-9_]+|up)\b(?=\s*[{\[)\s]|$)")


def families() -> dict[str, str]:
    """Parley's metric families (name -> type), including labelled ones with no samples yet."""
    # these modules register their metrics on the default registry when imported
    assert bot.ops.metrics and agent.llm.metrics and memory.metrics and bot.ops.gc_tuning
    assert adapters.metrics
    return {f.name: f.type for f in REGISTRY.collect() if f.name.startswith("parley_")}


def exported() -> set[str]:
    """Every series name Parley's metrics produce."""
    names = set()
    for name, kind in families().items():
        names.add(name)
        if kind == "counter":
            names.add(name + "_total")
        if kind == "histogram":
            names |= {name + suffix for suffix in ("_bucket", "_count", "_sum")}
    return names


def referenced(expressions: list[str]) -> set[str]:
    return {name for expr in expressions for name in METRIC.findall(expr)}


def dashboard_expressions() -> list[str]:
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def rules() -> list[dict[str, Any]]:
    document = yaml.safe_load((MONITORING / "alerts.yaml").read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def test_every_metric_in_the_dashboard_and_the_rules_is_exported() -> None:
    known = exported() | UPCOMING | PROMETHEUS
    assert "parley_queue_lag_seconds_bucket" in known and "parley_breaker_state" in known
    dashboard = referenced(dashboard_expressions())
    alerting = referenced([rule["expr"] for rule in rules()])
    assert dashboard and alerting
    assert dashboard <= known, dashboard - known
    assert alerting <= known, alerting - known


def test_the_dashboard_shows_every_metric_parley_exports() -> None:
    shown = {
        re.sub(r"_(bucket|count|sum|total)$", "", n) for n in referenced(dashboard_expressions())
    }
    assert set(families()) <= shown, set(families()) - shown


def test_the_dashboard_is_importable_grafana_json() -> None:
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 30
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}"
        assert panel["targets"] and all(t["refId"] for t in panel["targets"])
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"}
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24


DURATION = re.compile(r"^\d+[smhdwy]$")


def test_the_alert_rules_are_well_formed() -> None:
    document = yaml.safe_load((MONITORING / "alerts.yaml").read_text())
    assert set(document) == {"groups"}
    names = []
    for group in document["groups"]:
        assert group["name"] and group["rules"]
        for rule in group["rules"]:
            assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
            names.append(rule["alert"])
            assert re.fullmatch(r"[A-Z][A-Za-z]+", rule["alert"])
            expr = rule["expr"]
            assert isinstance(expr, str) and expr.strip()
            assert expr.count("(") == expr.count(")") and expr.count("{") == expr.count("}")
            assert "for" not in rule or DURATION.match(rule["for"]), rule["alert"]
            assert rule["labels"]["severity"] in {"critical", "warning", "info"}
            assert {"summary", "description", "runbook_url"} <= set(rule["annotations"])
    assert len(names) == len(set(names))
    assert {
        "ParleyWorkerLoopStalled",
        "ParleyQueueLagHigh",
        "ParleyBreakerOpen",
        "ParleyBudgetExhausted",
        "ParleyDeadLetters",
    } <= set(names)


def test_alert_label_values_are_ones_the_code_emits() -> None:
    expressions = " ".join(rule["expr"] for rule in rules())
    limits = set(re.findall(r'limit="(\w+)"', expressions))
    source = Path(bot.conversation.limits.__file__).read_text()
    assert limits and all(f'LIMITED.labels("{value}")' in source for value in limits)
    for outcome in re.findall(r'outcome="(\w+)"', expressions):
        assert any(name.lower() == outcome for name in dir(outcomes)), outcome
    breaker = next(rule for rule in rules() if rule["alert"] == "ParleyBreakerOpen")
    assert "== 2" in breaker["expr"]  # 2 is "open" in parley_breaker_state
    assert "2 open" in agent.llm.metrics.BREAKER_STATE._documentation


def anchors(markdown: str) -> set[str]:
    headings = re.findall(r"^#+ (.+)$", markdown, flags=re.MULTILINE)
    return {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in headings}


def test_every_alert_links_to_a_runbook_section() -> None:
    runbook = (ROOT / "docs" / "operations.md").read_text()
    sections = anchors(runbook)
    for rule in rules():
        path, _, anchor = rule["annotations"]["runbook_url"].partition("#")
        assert path == "docs/operations.md" and anchor in sections, rule["alert"]
    assert {"upgrade", "back-up-and-restore-redis", "rotate-secrets"} <= sections
