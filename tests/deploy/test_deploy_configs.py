"""The deployment files parse and agree with the code: variables, commands, probes, users."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from bot.cli import COMMANDS
from bot.config import all_variables

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
VARIABLES = set(all_variables())


def documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def test_compose_parses_and_sets_only_known_variables() -> None:
    compose = documents("docker-compose.yml")[0]
    services = compose["services"]
    assert {"redis", "ollama", "ollama-pull", "gateway", "worker"} <= set(services)
    for name in ("gateway", "worker"):
        service = services[name]
        assert set(service["environment"]) <= VARIABLES
        assert service["command"][0] in COMMANDS
        assert "healthcheck" in service
    assert services["worker"]["deploy"]["replicas"] >= 1
    assert "redis-data:/data" in services["redis"]["volumes"]
    assert "redis-stack" in services["redis"]["image"]  # search + JSON modules
    assert "pull" in " ".join(services["ollama-pull"]["entrypoint"])


def test_kubernetes_manifests_parse_and_probe_the_health_endpoints() -> None:
    kinds: dict[str, dict[str, Any]] = {}
    for name in ("gateway.yaml", "worker.yaml", "configmap.yaml", "secret.example.yaml"):
        for document in documents(f"k8s/{name}"):
            kinds[f"{document['kind']}/{document['metadata']['name']}"] = document
    assert {
        "Deployment/parley-gateway",
        "Service/parley-gateway",
        "Deployment/parley-worker",
        "ConfigMap/parley",
        "Secret/parley",
    } <= set(kinds)
    assert set(kinds["ConfigMap/parley"]["data"]) <= VARIABLES
    assert set(kinds["Secret/parley"]["stringData"]) <= VARIABLES
    port = int(kinds["ConfigMap/parley"]["data"]["PARLEY_HTTP_PORT"])
    for name in ("Deployment/parley-gateway", "Deployment/parley-worker"):
        spec = kinds[name]["spec"]["template"]["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True
        container = spec["containers"][0]
        assert container["args"][0] in COMMANDS
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port}
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port}


def test_dockerfile_is_multi_stage_non_root_and_runs_a_real_command() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert len(re.findall(r"^FROM ", dockerfile, flags=re.MULTILINE)) == 2
    assert re.search(r"^USER 10001$", dockerfile, flags=re.MULTILINE)
    assert '"parley"' in dockerfile and 'CMD ["run"]' in dockerfile and "run" in COMMANDS
    assert "/healthz" in dockerfile
    for name in re.findall(r"\b(PARLEY_[A-Z_]+)=", dockerfile):
        assert name in VARIABLES, name


def test_redis_conf_is_durable() -> None:
    settings = dict(
        line.split(None, 1)
        for line in (DEPLOY / "redis.conf").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )
    assert settings["appendonly"] == "yes"
    assert settings["appendfsync"] == "everysec"
    assert settings["maxmemory-policy"] == "noeviction"


def test_slack_manifest_matches_what_the_adapter_uses() -> None:
    manifest = documents("slack-app-manifest.yaml")[0]
    events = set(manifest["settings"]["event_subscriptions"]["bot_events"])
    assert {"app_mention", "message.im", "message.channels"} <= events
    assert manifest["settings"]["interactivity"]["is_enabled"] is True
    assert manifest["features"]["slash_commands"][0]["command"] == "/parley"
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    assert {"chat:write", "app_mentions:read", "im:history", "commands"} <= scopes
    urls = [manifest["settings"]["event_subscriptions"]["request_url"]]
    urls.append(manifest["settings"]["interactivity"]["request_url"])
    assert all(url.endswith("/slack/events") for url in urls)
