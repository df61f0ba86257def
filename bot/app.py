"""The composition root: builds every part from Settings and runs them until stopped."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator
from typing import Literal

import redis.asyncio as aioredis

from bot.config import Settings
from bot.embedded_redis import EmbeddedRedis
from bot.http import HttpServer

log = logging.getLogger(__name__)

Role = Literal["all", "gateway", "worker"]


@contextlib.asynccontextmanager
async def redis_connection(settings: Settings) -> AsyncIterator[aioredis.Redis]:
    """A client for REDIS_URL, or for an embedded Redis Stack started for this process."""
    embedded: EmbeddedRedis | None = None
    url = settings.redis.url
    if url is None:
        embedded = EmbeddedRedis(settings.redis.data_dir, server=settings.redis.server)
        url = await asyncio.to_thread(embedded.start)
    client = aioredis.Redis.from_url(url, health_check_interval=30)
    try:
        yield client
    finally:
        await client.aclose()
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)


async def serve(settings: Settings, role: Role = "all") -> None:
    """Run until SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with redis_connection(settings) as redis:
        await redis.ping()
        http = HttpServer(settings.http.host, settings.http.port)
        if role in ("all", "gateway"):
            await http.start()
        try:
            log.info("Parley is running (%s); press Ctrl-C to stop", role)
            await stop.wait()
            log.info("stopping")
        finally:
            await http.stop()
