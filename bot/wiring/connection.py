"""The Redis client every command uses: REDIS_URL, or an embedded Redis Stack server."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff

from bot.config import Settings
from bot.ops.embedded_redis import EmbeddedRedis

log = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def redis_connection(settings: Settings) -> AsyncIterator[aioredis.Redis]:
    """A client for REDIS_URL, or for an embedded Redis Stack started for this process."""
    embedded: EmbeddedRedis | None = None
    url = settings.redis.url
    if url is None:
        embedded = EmbeddedRedis(
            settings.redis.data_dir,
            server=settings.redis.server,
            password=settings.redis.password_text,
        )
        url = await asyncio.to_thread(embedded.start)
    client = redis_client(url, settings)
    try:
        yield client
    finally:
        await client.aclose()
        if embedded is not None:
            log.info("stopping the embedded Redis")
            await asyncio.to_thread(embedded.stop)
            log.info("stopped")


def redis_client(url: str, settings: Settings) -> aioredis.Redis:
    """A client whose pool is bounded: a burst waits for a free connection instead of failing.

    A command whose connection broke is tried once more on a fresh one, so the connections
    a Redis restart left stale fail nothing; while Redis is away the error comes at once and
    the loops back off themselves.
    """
    pool = aioredis.BlockingConnectionPool.from_url(
        url,
        password=settings.redis.password_text,  # a password in the URL wins
        max_connections=settings.redis.max_connections,
        timeout=settings.redis.pool_timeout,
        health_check_interval=30,
        retry=Retry(ExponentialWithJitterBackoff(base=0.01, cap=0.1), retries=1),
    )
    return aioredis.Redis.from_pool(pool)
