"""Every path the gateway serves to the outside is routed by the shipped Ingress, and the
README and the operations guide name it with what needs it; the Ingress routes nothing the
gateway does not serve. The gateway's paths are read from its aiohttp app, built with every
feature that adds one switched on."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from cryptography.fernet import Fernet

from bot.config import Settings
from bot.features.triggers import deliverable_triggers
from bot.ops.http import HttpServer
from bot.runtime.inbox import Inbox
from bot.runtime.keys import Keys
from bot.wiring import app
from bot.wiring.mcp_setup import build_connections
from bot.wiring.platforms import Platforms
from bot.wiring.public import public_routes
from tests.deploy.k8s import ROOT, load

INGRESS = ROOT / "deploy" / "k8s" / "overlays" / "production" / "ingress.yaml"


def everything_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    mcp = tmp_path / "mcp.json"
    mcp.write_text(
        json.dumps({"mcpServers": {"t": {"url": "https://t.example/mcp", "auth": "user"}}})
    )
    triggers = tmp_path / "triggers.json"
    triggers.write_text(
        json.dumps({"ci": {"secret": "s" * 32, "conversation": "telegram:42", "objective": "x"}})
    )
    for name, value in {
        "SLACK_BOT_TOKEN": "xoxb-1",
        "SLACK_SIGNING_SECRET": "secret",
        "SLACK_CLIENT_ID": "1.2",
        "SLACK_CLIENT_SECRET": "secret",
        "TELEGRAM_BOT_TOKEN": "1:abc",
        "PARLEY_TELEGRAM_MODE": "webhook",
        "PARLEY_TELEGRAM_WEBHOOK_URL": "https://parley.example.com/telegram/webhook",
        "PARLEY_TELEGRAM_WEBHOOK_SECRET": "secret",
        "PARLEY_TRIGGERS_CONFIG": str(triggers),
        "PARLEY_MCP_CONFIG": str(mcp),
        "PARLEY_SECRET_KEY": Fernet.generate_key().decode(),
        "PARLEY_PUBLIC_URL": "https://parley.example.com",
    }.items():
        monkeypatch.setenv(name, value)
    return Settings.load(env_file=None)


async def served(settings: Settings) -> set[str]:
    """The public app's paths, `{name}` written `<name>`, as `run_role` registers them."""
    redis = aioredis.Redis.from_url("redis://127.0.0.1:1/0")  # never reached: no call made
    keys = Keys(settings.redis.key_prefix)
    inbox = Inbox(redis, keys, dedup_ttl=60)
    platforms = Platforms(settings, redis, keys, inbox.submit)
    triggers = deliverable_triggers(settings.schedules.triggers_config, settings.chat_platforms())
    http = HttpServer("127.0.0.1", 0)
    for route in public_routes(
        settings,
        platforms,
        inbox,
        triggers=triggers,
        connections=build_connections(settings, redis),
    ):
        http.add_route(*route)
    await redis.aclose()
    return {re.sub(r"\{(\w+)\}", r"<\1>", r.canonical) for r in http.app.router.resources()}


def ingress_rules() -> list[tuple[str, str]]:
    ingress = load(INGRESS)[0]
    paths = [p for rule in ingress["spec"]["rules"] for p in rule["http"]["paths"]]
    return [(p["path"], p["pathType"]) for p in paths]


def routed(path: str, rules: list[tuple[str, str]]) -> bool:
    """Whether a request for `path` reaches the gateway (Kubernetes' Exact and Prefix: a
    prefix matches whole path elements)."""
    sample = re.sub(r"<\w+>", "sample", path)
    for rule, kind in rules:
        if kind == "Exact" and sample == rule:
            return True
        elements = [e for e in rule.split("/") if e]
        if kind == "Prefix" and sample.split("/")[1 : len(elements) + 1] == elements:
            return True
    return False


async def test_the_ingress_routes_every_public_path_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = await served(everything_on(tmp_path, monkeypatch))
    assert {
        "/slack/events",
        "/telegram/webhook",
        "/hooks/<name>",
        "/oauth/callback",
        "/slack/install",
        "/slack/oauth_redirect",
    } <= paths
    rules = ingress_rules()
    assert [path for path in sorted(paths) if not routed(path, rules)] == []
    for rule, _ in rules:  # every rule leads to something served
        here = {p for p in paths if routed(p, [(rule, "Prefix")])}
        assert here, f"the Ingress routes {rule}, which the gateway does not serve"


async def test_the_readme_and_the_operations_guide_name_every_public_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = await served(everything_on(tmp_path, monkeypatch))
    for doc in ("README.md", "docs/operations.md"):
        text = (ROOT / doc).read_text()
        start = text.index("Public paths")
        listing = text[start : start + 2500]
        missing = [path for path in sorted(paths) if f"`{path}`" not in listing]
        assert missing == [], f"{doc}'s public paths leave out {missing}"


def test_the_gateway_registers_public_routes_only_through_public_routes() -> None:
    """So the two tests above see every route the running gateway serves."""
    source = inspect.getsource(app.run_role)
    assert source.count("add_route(") == 1 and "public_routes(" in source
