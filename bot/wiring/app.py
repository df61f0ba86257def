"""The composition root: builds every part from Settings and runs them until stopped.

Roles: `all` (one process: HTTP, platforms and workers), `gateway` (HTTP, Socket Mode and
Telegram polling, queueing events) and `worker` (running the agent on queued events and
delivering replies). Any number of each share one Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from typing import Literal

import redis.asyncio as aioredis

from bot.config import Settings
from bot.conversation.limits import Limits
from bot.features.triggers import deliverable_triggers
from bot.ops.gc_tuning import GcTuning
from bot.ops.health import REDIS_DOWN, Health
from bot.ops.http import HttpServer
from bot.ops.invocation import parley_command
from bot.ops.shutdown import Watchdog, leave_behind
from bot.runtime.inbox import Inbox
from bot.runtime.keys import Keys
from bot.wiring.connection import redis_connection
from bot.wiring.mcp_setup import build_connections, build_toolbox, readiness, task_polling
from bot.wiring.platforms import NO_PLATFORM, Platforms
from bot.wiring.public import public_routes

log = logging.getLogger(__name__)

Role = Literal["all", "gateway", "worker"]


async def serve(settings: Settings, role: Role = "all") -> None:
    """Run until SIGINT or SIGTERM, then drain and stop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # past the drain and the grace, whatever still runs is named and the process exits
    watchdog = Watchdog(settings.runtime.drain_timeout + settings.runtime.stop_grace)
    watchdog.start(loop)

    def stopping(signum: int, frame: object) -> None:
        # a plain handler, not the loop's: it arms the watchdog even if the loop is blocked
        watchdog.arm()
        loop.call_soon_threadsafe(stop.set)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stopping)
    async with redis_connection(settings) as redis:
        await redis.ping()
        await run_role(settings, redis, role, stop)
    await leave_behind(settings.runtime.stop_grace / 4)


async def run_role(
    settings: Settings, redis: aioredis.Redis, role: Role, stop: asyncio.Event
) -> None:
    keys = Keys(settings.redis.key_prefix)
    gateway = role in ("all", "gateway")
    workers = role in ("all", "worker")
    # MCP servers run with workers; a broken config file stops us before anything is opened
    toolbox = build_toolbox(settings, redis) if workers else None
    connections = build_connections(settings, redis) if gateway else None
    inbox = Inbox(redis, keys, dedup_ttl=settings.runtime.dedup_ttl)
    # a trigger whose platform is not configured could never post: refused before anything
    triggers = (
        deliverable_triggers(settings.schedules.triggers_config, settings.chat_platforms())
        if gateway
        else {}
    )
    limits = Limits(redis, keys.prefix, settings.limits)
    http = HttpServer(
        settings.http.host,
        settings.http.port,
        metrics_host=settings.http.metrics_host,
        metrics_port=settings.http.metrics_port,
    )
    health = Health()
    http.add_check("redis", _redis_check(redis))
    http.add_check("loops", health.readiness)
    http.add_liveness_check("loops", health.liveness)
    platforms = Platforms(settings, redis, keys, inbox.submit if gateway else None, health)
    work = None
    if workers:  # a gateway never loads the model SDKs or the memory index (work.py)
        from bot.wiring.work import build_work

        tools = toolbox.source() if toolbox is not None else None
        work = await build_work(
            settings,
            redis,
            http=http,
            platforms=platforms,
            tools=tools,
            limits=limits,
            health=health,
            tasks=task_polling(toolbox),
        )

    # Start-up is over: what exists now lives as long as the process.
    gc_tuning = GcTuning(freeze=settings.runtime.gc_freeze, threshold=settings.runtime.gc_threshold)
    gc_tuning.install()
    try:
        if gateway:
            routes = public_routes(
                settings, platforms, inbox, triggers=triggers, connections=connections
            )
            for route in routes:
                http.add_route(*route)
        await http.start()  # every role serves /healthz, /readyz and /metrics
        if gateway:
            await platforms.start_receiving(stop)
            platforms.register_checks(http)
            if not platforms.adapters:
                log.warning(
                    "%s; or chat in a terminal: `%s console`", NO_PLATFORM, parley_command()
                )
        if toolbox is not None:
            toolbox.launch()  # in the background: a slow or broken server never holds us up
            http.add_check("mcp", readiness(toolbox))
        if work is not None:
            # Running means consuming: the inbox's consumer group exists before we say so
            # (a Redis away now is the worker loop's to wait out: it creates it then).
            with contextlib.suppress(*REDIS_DOWN):
                await work.runtime.worker.ensure_group()
            # its loops (the re-offers of Telegram prompts among them) live as long as it
            worker_task = asyncio.create_task(work.runtime.run(stop))
        log.info("Parley is running (%s); press Ctrl-C to stop", role)
        await stop.wait()
        log.info("stopping: no new work; finishing what is in flight")
        if gateway:
            await platforms.stop_receiving()
        if work is not None:
            await worker_task
    finally:
        await http.stop()
        await platforms.close()
        if toolbox is not None:
            await toolbox.stop()
        await limits.flush_at_stop(within=settings.runtime.drain_timeout)  # the last charges
        if work is not None:
            await work.close()
        gc_tuning.uninstall()
        log.info("%s stopped", role)


def _redis_check(redis: aioredis.Redis):  # type: ignore[no-untyped-def]
    async def check() -> tuple[bool, str]:
        try:
            async with asyncio.timeout(1):
                await redis.ping()
        except Exception as exc:
            return False, type(exc).__name__
        return True, "reachable"

    return check
