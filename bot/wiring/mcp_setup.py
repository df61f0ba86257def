"""MCP servers for a worker: loaded from PARLEY_MCP_CONFIG, started with the worker, shown to
operators (`parley mcp list`, `parley doctor`, `/readyz` detail)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from redis.asyncio import Redis

from adapters import traits
from agent.mcp import McpConfig, McpConfigError, load_config
from agent.mcp.config import shown_url
from bot.config import Settings
from bot.ops.checks import CHECK_TIMEOUT, Check
from bot.ops.http import ReadinessCheck
from bot.runtime.keys import Keys

if TYPE_CHECKING:
    from agent.mcp import McpToolbox, Timing
    from agent.mcp.following import TaskPolling
    from bot.features.connections.store import Connections

log = logging.getLogger(__name__)


def timing(settings: Settings) -> Timing:
    from agent.mcp import Timing  # the MCP SDK loads only where servers are configured

    mcp = settings.mcp
    return Timing(
        start_timeout=mcp.start_timeout,
        call_timeout=mcp.call_timeout,
        retry_max=mcp.retry_max,
        question_wait=mcp.question_wait,
    )


def build_toolbox(settings: Settings, redis: Redis | None = None) -> McpToolbox | None:
    """The configured servers, not yet started; None when PARLEY_MCP_CONFIG is unset.

    Raises McpConfigError when the file cannot be used: a worker does not start on a broken
    configuration, the same as on any other invalid setting. Per-user servers need `redis`
    (where people's tokens are kept) and the secret key and public URL.
    """
    if settings.mcp.config is None:
        return None
    from agent.mcp import McpToolbox

    config = _config(settings.mcp.config)
    log.info("MCP servers configured: %s", ", ".join(config.enabled()) or "none")
    credentials = build_connections(settings, redis, config) if redis is not None else None
    pins = None
    if redis is not None:  # approval classes as first listed, kept across restarts
        from agent.mcp.pins import RedisPins

        pins = RedisPins(redis, settings.redis.key_prefix)
    return McpToolbox(config, timing(settings), credentials=credentials, pins=pins)


def _config(path: Path) -> McpConfig:
    try:
        config = load_config(path)
    except McpConfigError as exc:  # name the setting: the file alone may not ring a bell
        raise McpConfigError(f"PARLEY_MCP_CONFIG: {exc}") from None
    warn_person_chats(config)
    return config


def warn_person_chats(config: McpConfig) -> None:
    """Warn of an allow entry whose chat is a person's id on its platform (a Slack user id
    written as a chat): it matches no conversation, and `<platform>:user:<id>` was meant."""
    for server in config.servers.values():
        for entry in server.allow or ():
            where, _, target = entry.partition(":")
            if traits.of(where).person_like(target):
                log.warning(
                    "MCP allow entry %s names a %s user as a chat; it matches no "
                    "conversation (write %s:user:%s for that person)",
                    entry,
                    where.capitalize(),
                    where,
                    target,
                )


def build_connections(
    settings: Settings, redis: Redis, config: McpConfig | None = None
) -> Connections | None:
    """People's connected accounts, when a server has `"auth": "user"` and the settings
    they need are there; None otherwise."""
    if config is None:
        if settings.mcp.config is None:
            return None
        config = _config(settings.mcp.config)
    personal = {n: s for n, s in config.enabled().items() if s.auth == "user"}
    mcp = settings.mcp
    if not personal or mcp.secret_key is None or mcp.public_url is None:
        return None
    from bot.features.connections.store import Connections

    return Connections(
        redis,
        Keys(settings.redis.key_prefix),
        servers=personal,
        secret_key=mcp.secret_key.get_secret_value(),
        public_url=mcp.public_url,
        connect_ttl=mcp.connect_ttl,
        trusted=mcp.trusted_hosts,
        idle=mcp.connection_idle,
    )


def task_polling(toolbox: McpToolbox | None) -> TaskPolling | None:
    """What follows long MCP tasks asks the shared servers with (none without servers)."""
    if toolbox is None:
        return None
    from agent.mcp import ServerTasks

    return ServerTasks(toolbox)


def readiness(toolbox: McpToolbox) -> ReadinessCheck:
    """Detail for /readyz. A server that is down degrades the bot but does not make it unready."""

    async def check() -> tuple[bool, str]:
        return True, summary(toolbox)

    return check


def summary(toolbox: McpToolbox) -> str:
    servers = toolbox.status().values()
    ready = [s for s in servers if s.state == "ready"]
    down = [f"{s.name} {s.state} ({s.error or 'starting'})" for s in servers if s not in ready]
    left_out = [f"{s.name}__{tool}" for s in servers for tool in s.skipped]
    clashes = toolbox.collisions()
    text = f"{len(ready)}/{len(servers)} servers ready"
    if down:
        text += f"; {', '.join(down)}"
    if left_out:
        text += f"; tools left out (invalid input schema): {', '.join(left_out)}"
    if clashes:
        text += f"; tools left out (same name): {', '.join(sorted(clashes))}"
    return text


async def check_mcp(settings: Settings) -> Check:
    """For `parley doctor`: the file parses and every server starts in time."""
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
    personal, missing = personal_servers(settings)
    try:
        await toolbox.start(within=min(settings.mcp.start_timeout, CHECK_TIMEOUT))
        servers = toolbox.status().values()
        tools = sum(len(s.tools) for s in servers)
        clashes = toolbox.collisions()
        if personal and missing:
            return Check(
                name="mcp",
                status="warn",
                detail=f"{summary(toolbox)}; {', '.join(personal)} need each user's own "
                f"account, which needs {' and '.join(missing)}",
                hint="set them, or those servers are left out",
            )
        if personal:
            callback = f"{(settings.mcp.public_url or '').rstrip('/')}/oauth/callback"
            detail = f"{summary(toolbox)}, {tools} tools; each user connects their own account "
            detail += f"for {', '.join(personal)} (callback {callback}"
            trusted = settings.mcp.trusted_hosts.strip()
            detail += f"; trusted hosts: {trusted})" if trusted else ")"
            if all(s.state == "ready" and not s.skipped for s in servers) and not clashes:
                return Check(name="mcp", status="ok", detail=detail)
        if all(s.state == "ready" and not s.skipped for s in servers) and not clashes:
            return Check(name="mcp", status="ok", detail=f"{summary(toolbox)}, {tools} tools")
        if all(s.state == "ready" for s in servers):
            return Check(
                name="mcp",
                status="warn",
                detail=f"{summary(toolbox)}, {tools} tools",
                hint="a tool with an invalid input schema or a name another server's tool "
                "takes too is not offered; fix it in its server or rename a server",
            )
        return Check(
            name="mcp",
            status="warn",
            detail=summary(toolbox),
            hint="`parley mcp list` shows each server; the bot runs without the ones that are down",
        )
    finally:
        await toolbox.stop()


def personal_servers(settings: Settings) -> tuple[list[str], list[str]]:
    """The servers with `"auth": "user"`, and the settings they need that are not set."""
    if settings.mcp.config is None:
        return [], []
    config = load_config(settings.mcp.config)
    personal = [name for name, s in config.enabled().items() if s.auth == "user"]
    missing = [
        name
        for name, value in (
            ("PARLEY_SECRET_KEY", settings.mcp.secret_key),
            ("PARLEY_PUBLIC_URL", settings.mcp.public_url),
        )
        if value is None
    ]
    return personal, missing


def listing(toolbox: McpToolbox) -> list[str]:
    """`parley mcp list`: each server, its state and its tools with their approval class."""
    lines: list[str] = []
    clashes = toolbox.collisions()
    for server in toolbox.status().values():
        config = server.config
        # never the env, headers, or a URL's user, password or query: that is where secrets go
        where = config.command or shown_url(config.url or "")
        state = server.state + (f" ({server.error})" if server.error else "")
        if server.state == "ready" and server.protocol:
            state += f", MCP {server.protocol}"  # which revision's features it gets
        lines.append(f"{server.name}  [{config.transport}] {where}  {state}")
        if config.allow is not None:
            lines.append(f"    offered in: {', '.join(config.allow)}")
        for tool in server.tools:
            approval = "needs approval" if tool.side_effects else "read-only, runs freely"
            if tool.name in clashes:
                approval = f"left out: the same name as {' and '.join(clashes[tool.name])}"
            lines.append(f"    {tool.name:<40} {approval}")
        for name, why in server.skipped.items():
            lines.append(f"    {name:<40} left out: {why}")
    return lines
