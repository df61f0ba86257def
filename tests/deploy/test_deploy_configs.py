"""The deployment files parse and agree with the code: variables, commands, probes, users."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft7Validator

from agent.mcp import McpConfigError, load_config
from bot.cli import COMMANDS
from bot.config import SLACK_BOT_SCOPES, all_variables

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
        # Read-only root, nothing but the declared writable directories.
        assert service["read_only"] is True and service["cap_drop"] == ["ALL"]
        assert {t.split(":")[0] for t in service["tmpfs"]} == {"/tmp", "/home/parley"}
        # Health and metrics on the internal port, never published.
        port = service["environment"]["PARLEY_METRICS_PORT"]
        assert f"127.0.0.1:{port}/" in " ".join(service["healthcheck"]["test"])
        assert not any(port in str(p) for p in service.get("ports", []))
    assert services["gateway"]["ports"] == ["8080:8080"]
    assert services["worker"]["deploy"]["replicas"] >= 1
    assert "redis-data:/data" in services["redis"]["volumes"]
    assert services["redis"]["image"].startswith("redis:8")  # query engine + JSON built in
    assert "entrypoint" not in services["redis"]  # the image's entrypoint loads the modules


def test_compose_reads_the_projects_env_file_everywhere() -> None:
    text = (DEPLOY / "docker-compose.yml").read_text()
    # `${...}` would be interpolated by compose from deploy/.env, not the project's .env.
    assert not re.search(r"(?<!\$)\$\{", text)
    services = documents("docker-compose.yml")[0]["services"]
    for name in ("gateway", "worker", "ollama-pull"):
        assert services[name]["env_file"] == "../.env", name
    pull = " ".join(services["ollama-pull"]["entrypoint"])
    assert "pull" in pull and "$${OLLAMA_MODEL:-" in pull
    default = re.search(r"OLLAMA_MODEL:-([^}]+)\}", pull)
    assert default and default.group(1) == all_variables()["OLLAMA_MODEL"]


def final_stage(dockerfile: str) -> str:
    return dockerfile[[m.start() for m in re.finditer(r"^FROM ", dockerfile, re.M)][-1] :]


def test_dockerfile_is_multi_stage_pinned_non_root_and_runs_a_real_command() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    froms = re.findall(r"^FROM (\S+)", dockerfile, flags=re.MULTILINE)
    assert froms == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}"]
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", dockerfile, flags=re.MULTILINE)
    assert base and re.fullmatch(r"python:3\.11-slim-\w+@sha256:[0-9a-f]{64}", base.group(1))
    assert "imagetools inspect" in dockerfile  # how to refresh the digest
    final = final_stage(dockerfile)
    assert "/wheels" not in final  # wheels never reach the final image's layers
    assert re.findall(r"^COPY (.*)$", final, flags=re.MULTILINE) == [
        "--from=build /opt/parley /opt/parley"
    ]
    assert re.search(r"^USER 10001:10001$", final, flags=re.MULTILINE)
    assert '"parley"' in final and 'CMD ["run"]' in final and "run" in COMMANDS
    env = dict(
        re.findall(r"\b([A-Z_]+)=(\S+)", " ".join(re.findall(r"^ENV .*(?:\n .*)*", final, re.M)))
    )
    assert env["HOME"] == "/home/parley" and env["TMPDIR"] == "/tmp"
    assert 'VOLUME ["/tmp", "/home/parley"]' in final
    assert "PARLEY_METRICS_PORT" in final.split("HEALTHCHECK")[1] and "/healthz" in final
    assert re.search(r"^EXPOSE 8080 9090$", final, flags=re.MULTILINE)
    for name in re.findall(r"\b(PARLEY_[A-Z_]+)=", dockerfile):
        assert name in VARIABLES, name


def test_the_build_context_leaves_secrets_out() -> None:
    ignored = (DEPLOY.parent / ".dockerignore").read_text().splitlines()
    assert ".env" in ignored and ".venv" in ignored and ".git" in ignored


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
    # an OAuth install asks for the manifest's scopes and comes back to the adapter's route
    assert scopes == set(SLACK_BOT_SCOPES)
    (redirect,) = manifest["oauth_config"]["redirect_urls"]
    assert redirect.endswith("/slack/oauth_redirect")
    assert {"app_uninstalled", "tokens_revoked"} <= events


# Slack's published app manifest schema, version 1 (schemas/manifest.schema.1.0.0.json in
# github.com/slackapi/manifest-schema at c50cfa8, 2026-07-21, MIT licence), vendored as is.
SLACK_MANIFEST_SCHEMA = Path(__file__).with_name("slack_manifest.schema.json")


def test_the_slack_manifest_passes_slacks_published_schema() -> None:
    schema = json.loads(SLACK_MANIFEST_SCHEMA.read_text())
    manifest = documents("slack-app-manifest.yaml")[0]
    errors = [e.message for e in Draft7Validator(schema).iter_errors(manifest)]
    assert errors == []
    broken = {**manifest, "features": {**manifest["features"], "agent_view": {"x": 1}}}
    assert list(Draft7Validator(schema).iter_errors(broken))  # the schema does bite


def test_the_slack_manifest_uses_agent_messaging() -> None:
    manifest = documents("slack-app-manifest.yaml")[0]
    assert "assistant_view" not in manifest["features"]
    assert manifest["features"]["agent_view"]["agent_description"]
    events = set(manifest["settings"]["event_subscriptions"]["bot_events"])
    assert {"app_home_opened", "app_context_changed", "agent_session_stopped"} <= events
    assert {"message.im", "message.channels", "message.groups", "app_mention"} <= events
    assert not {"assistant_thread_started", "assistant_thread_context_changed"} & events
    assert manifest["features"]["app_home"]["messages_tab_enabled"] is True


def test_compose_hands_the_triggers_file_to_the_gateway_alone_as_a_secret() -> None:
    override = documents("docker-compose.triggers.yml")[0]
    assert set(override["services"]) == {"gateway"}  # never the workers
    gateway = override["services"]["gateway"]
    assert set(gateway["environment"]) <= VARIABLES
    mounted = gateway["secrets"][0]
    assert override["secrets"][mounted["source"]]["file"] == "./triggers.json"
    assert gateway["environment"]["PARLEY_TRIGGERS_CONFIG"] == f"/run/secrets/{mounted['target']}"
    # the file with the secrets stays out of git and out of the image
    assert "deploy/triggers.json" in (DEPLOY.parent / ".gitignore").read_text().splitlines()
    assert "deploy/triggers.json" in (DEPLOY.parent / ".dockerignore").read_text().splitlines()


def test_the_compose_mcp_comment_says_what_the_example_needs_beyond_the_image() -> None:
    """Following the comment must not stop the workers: every command the image lacks and
    every ${VAR} the example needs is named there, with what to do."""
    compose = (DEPLOY / "docker-compose.yml").read_text()
    start = compose.index("# MCP servers")
    comment = " ".join(
        line.strip().lstrip("#").strip()
        for line in compose[start:].splitlines()
        if line.strip().startswith("#")
    )
    example_file = DEPLOY / "mcp-servers.example.json"
    example = json.loads(example_file.read_text())["mcpServers"]
    in_image = {"python", "parley"}  # the image's PATH: /opt/parley/bin and Python's own
    for name, server in example.items():
        command = server.get("command")
        if command is not None and command not in in_image:
            assert f'"{name}" server runs `{command}`, which this image lacks' in comment
            assert "RUN pip install" in comment and '"command":' in comment
        for variable in re.findall(r"\$\{(\w+)\}", json.dumps(server)):
            assert f"{variable} in ../.env" in comment
            with pytest.raises(McpConfigError, match=rf"uses \${{{variable}}}, which is not set"):
                load_config(example_file, {})
    assert "docker compose run --rm worker doctor" in comment
