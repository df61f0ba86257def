"""`parley doctor`: one line per dependency, each failure with what to do about it."""

from __future__ import annotations

import asyncio
import errno
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from bot.config import Settings

Status = Literal["ok", "fail", "warn", "not configured"]
CHECK_TIMEOUT = 10.0


@dataclass(frozen=True, kw_only=True)
class Check:
    name: str
    status: Status
    detail: str
    hint: str = ""

    def line(self) -> str:
        text = f"{self.status:<15} {self.name:<10} {self.detail}"
        return f"{text}\n{'':<26} -> {self.hint}" if self.hint else text


async def check_redis(settings: Settings) -> Check:
    if settings.redis.url is None:
        return await asyncio.to_thread(_check_embedded_redis, settings)
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(settings.redis.url, socket_connect_timeout=3)
    try:
        await client.ping()
        modules = {m[b"name"].decode().lower(): m[b"ver"] for m in await client.module_list()}
    except Exception as exc:
        return Check(
            name="redis",
            status="fail",
            detail=f"cannot reach REDIS_URL ({type(exc).__name__}: {exc})",
            hint="start Redis 8 or Redis Stack there, or unset REDIS_URL to use the embedded one",
        )
    finally:
        await client.aclose()
    if "search" not in modules:
        return Check(
            name="redis",
            status="fail",
            detail="reachable, but the search module is missing (memory needs it)",
            hint="use Redis 8 or Redis Stack (redis/redis-stack-server), not plain Redis 7",
        )
    return Check(name="redis", status="ok", detail=f"reachable, search module {modules['search']}")


def _check_embedded_redis(settings: Settings) -> Check:
    from bot.ops.embedded_redis import SETUP_HINT, EmbeddedRedis

    embedded = EmbeddedRedis(settings.redis.data_dir, server=settings.redis.server)
    if embedded.server is None or not embedded.server.exists():
        return Check(
            name="redis",
            status="fail",
            detail="no REDIS_URL and no bundled server",
            hint=SETUP_HINT,
        )
    result = subprocess.run(
        [str(embedded.server), "--version"],
        env=embedded.environment(),
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        return Check(
            name="redis",
            status="fail",
            detail=f"the bundled server does not run: {result.stderr.strip()[:200]}",
            hint=SETUP_HINT,
        )
    return Check(
        name="redis",
        status="ok",
        detail=f"embedded Redis Stack will run under {settings.redis.data_dir}",
    )


async def check_anthropic(settings: Settings) -> Check:
    if settings.anthropic.api_key is None:
        return Check(
            name="anthropic",
            status="not configured",
            detail="ANTHROPIC_API_KEY is not set",
            hint="set ANTHROPIC_API_KEY to use the hosted model",
        )
    import anthropic

    client = anthropic.AsyncAnthropic(
        api_key=settings.anthropic.api_key.get_secret_value(),
        base_url=settings.anthropic.base_url,
        max_retries=0,
        timeout=CHECK_TIMEOUT,
    )
    try:
        await client.models.retrieve(settings.anthropic.model)
    except anthropic.AuthenticationError:
        return Check(
            name="anthropic",
            status="fail",
            detail="the API key was rejected",
            hint="check ANTHROPIC_API_KEY",
        )
    except anthropic.NotFoundError:
        return Check(
            name="anthropic",
            status="fail",
            detail=f"model {settings.anthropic.model!r} is unknown",
            hint="set ANTHROPIC_MODEL to a model your key can use",
        )
    except anthropic.APIError as exc:
        return Check(
            name="anthropic",
            status="fail",
            detail=f"API not reachable ({type(exc).__name__})",
            hint="check ANTHROPIC_BASE_URL and the network; Ollama will answer meanwhile",
        )
    finally:
        await client.close()
    return Check(
        name="anthropic", status="ok", detail=f"key accepted, model {settings.anthropic.model}"
    )


async def check_ollama(settings: Settings) -> Check:
    import ollama

    client = ollama.AsyncClient(host=settings.ollama.host, timeout=CHECK_TIMEOUT)
    try:
        listed = await client.list()
    except (ConnectionError, ollama.ResponseError, OSError) as exc:
        return Check(
            name="ollama",
            status="not configured",
            detail=f"no Ollama at {settings.ollama.host} ({type(exc).__name__})",
            hint="install Ollama and run `ollama serve`, or set OLLAMA_HOST (it is the fallback model)",
        )
    except Exception as exc:
        return Check(
            name="ollama",
            status="fail",
            detail=f"unexpected answer from {settings.ollama.host} ({type(exc).__name__})",
            hint="check OLLAMA_HOST",
        )
    names = {m.model for m in listed.models if m.model}
    wanted = settings.ollama.model
    if wanted not in names and f"{wanted}:latest" not in names:
        return Check(
            name="ollama",
            status="fail",
            detail=f"reachable, but model {wanted!r} is not pulled",
            hint=f"run `ollama pull {wanted}`, or set OLLAMA_MODEL to one of: {', '.join(sorted(names)) or 'none'}",
        )
    return Check(name="ollama", status="ok", detail=f"reachable, model {wanted} available")


async def check_slack(settings: Settings) -> Check:
    if settings.slack.bot_token is None:
        return Check(
            name="slack",
            status="not configured",
            detail="SLACK_BOT_TOKEN is not set",
            hint="see README 'Connect Slack' to add Parley to a workspace",
        )
    from slack_sdk.errors import SlackApiError
    from slack_sdk.web.async_client import AsyncWebClient

    client = AsyncWebClient(
        token=settings.slack.bot_token.get_secret_value(),
        base_url=settings.slack.api_url,
        timeout=int(CHECK_TIMEOUT),
    )
    try:
        auth = await client.auth_test()
    except SlackApiError as exc:
        return Check(
            name="slack",
            status="fail",
            detail=f"auth.test failed: {exc.response.get('error', 'unknown error')}",
            hint="check SLACK_BOT_TOKEN (it starts with xoxb-)",
        )
    except Exception as exc:
        return Check(
            name="slack",
            status="fail",
            detail=f"Slack API not reachable ({type(exc).__name__})",
            hint="check SLACK_API_URL and the network",
        )
    missing = []
    if settings.slack.signing_secret is None and settings.slack.app_token is None:
        missing.append("SLACK_SIGNING_SECRET (HTTP events) or SLACK_APP_TOKEN (Socket Mode)")
    if missing:
        return Check(
            name="slack",
            status="fail",
            detail=f"token valid for {auth.get('team')}, but {missing[0]} is not set",
            hint="Parley cannot receive Slack events without one of them",
        )
    mode = "Socket Mode" if settings.slack.app_token else "HTTP events on /slack/events"
    return Check(
        name="slack", status="ok", detail=f"bot @{auth.get('user')} in {auth.get('team')}, {mode}"
    )


async def check_telegram(settings: Settings) -> Check:
    if settings.telegram.token is None:
        return Check(
            name="telegram",
            status="not configured",
            detail="TELEGRAM_BOT_TOKEN is not set",
            hint="create a bot with @BotFather and set TELEGRAM_BOT_TOKEN",
        )
    from telegram import Bot
    from telegram.error import InvalidToken, TelegramError

    root = settings.telegram.api_url.rstrip("/")
    bot = Bot(
        settings.telegram.token.get_secret_value(),
        base_url=f"{root}/bot",
        base_file_url=f"{root}/file/bot",
    )
    try:
        me = await bot.get_me()
    except InvalidToken:
        return Check(
            name="telegram",
            status="fail",
            detail="getMe rejected the token",
            hint="check TELEGRAM_BOT_TOKEN",
        )
    except TelegramError as exc:
        return Check(
            name="telegram",
            status="fail",
            detail=f"Bot API not reachable ({type(exc).__name__})",
            hint="check TELEGRAM_API_URL and the network",
        )
    if settings.telegram.mode == "webhook" and not settings.telegram.webhook_url:
        return Check(
            name="telegram",
            status="fail",
            detail=f"@{me.username}: webhook mode without PARLEY_TELEGRAM_WEBHOOK_URL",
            hint="set the public URL that reaches /telegram/webhook, or use polling",
        )
    return Check(
        name="telegram", status="ok", detail=f"bot @{me.username}, {settings.telegram.mode}"
    )


async def check_http(settings: Settings) -> Check:
    """Both listeners' addresses must be free, or `parley run` stops at start."""
    listeners = [
        (settings.http.host, settings.http.port, "PARLEY_HTTP_PORT"),
        (settings.http.metrics_host, settings.http.metrics_port, "PARLEY_METRICS_PORT"),
    ]
    for host, port, setting in listeners:
        if port == 0:
            continue
        try:
            with socket.create_server((host, port)):
                pass
        except OSError as exc:
            detail = (
                f"{host}:{port} is already in use"
                if exc.errno == errno.EADDRINUSE
                else f"cannot listen on {host}:{port} ({exc.strerror})"
            )
            return Check(
                name="http",
                status="fail",
                detail=detail,
                hint=f"stop whatever listens there (or Parley already runs), or set {setting}",
            )
    ports = " and ".join(f"{h}:{p}" for h, p, _ in listeners)
    return Check(name="http", status="ok", detail=f"{ports} are free to listen on")


async def check_mcp(settings: Settings) -> Check:
    from agent.mcp import McpConfigError
    from bot.wiring.mcp_setup import build_toolbox, summary

    try:
        toolbox = build_toolbox(settings)
    except McpConfigError as exc:
        return Check(
            name="mcp", status="fail", detail=str(exc), hint="fix the file PARLEY_MCP_CONFIG names"
        )
    if toolbox is None:
        return Check(
            name="mcp",
            status="not configured",
            detail="PARLEY_MCP_CONFIG is not set",
            hint="point it at an mcpServers JSON file to give Parley MCP tools",
        )
    try:
        await toolbox.start(within=min(settings.mcp.start_timeout, CHECK_TIMEOUT))
        servers = toolbox.status().values()
        tools = sum(len(s.tools) for s in servers)
        if all(s.state == "ready" and not s.skipped for s in servers):
            return Check(name="mcp", status="ok", detail=f"{summary(toolbox)}, {tools} tools")
        if all(s.state == "ready" for s in servers):
            return Check(
                name="mcp",
                status="warn",
                detail=f"{summary(toolbox)}, {tools} tools",
                hint="a tool with an invalid input schema is not offered; fix it in its server",
            )
        return Check(
            name="mcp",
            status="warn",
            detail=summary(toolbox),
            hint="`parley mcp list` shows each server; the bot runs without the ones that are down",
        )
    finally:
        await toolbox.stop()


CHECKS: list[Callable[[Settings], Awaitable[Check]]] = [
    check_http,
    check_redis,
    check_anthropic,
    check_ollama,
    check_slack,
    check_telegram,
    check_mcp,
]


async def _guarded(check: Callable[[Settings], Awaitable[Check]], settings: Settings) -> Check:
    name = check.__name__.removeprefix("check_")
    try:
        async with asyncio.timeout(CHECK_TIMEOUT + 5):
            return await check(settings)
    except TimeoutError:
        return Check(name=name, status="fail", detail="no answer in time", hint="check the network")


async def diagnose(settings: Settings) -> list[Check]:
    return list(await asyncio.gather(*(_guarded(check, settings) for check in CHECKS)))


def verdict(checks: list[Check]) -> tuple[bool, str]:
    """Redis is required, and at least one model provider; platforms are optional."""
    by_name = {c.name: c for c in checks}
    if any(c.status == "fail" for c in checks):
        return False, "some checks failed"
    if by_name["redis"].status != "ok":
        return False, "Redis is required"
    if "ok" not in (by_name["anthropic"].status, by_name["ollama"].status):
        return (
            False,
            "no model provider: set ANTHROPIC_API_KEY, or run Ollama with the model pulled",
        )
    return True, "ready"


async def run_doctor(settings: Settings) -> int:
    checks = await diagnose(settings)
    for check in checks:
        print(check.line())
    ok, summary = verdict(checks)
    print(f"\n{'ready' if ok else 'not ready'}: {summary}", file=sys.stdout)
    return 0 if ok else 1
