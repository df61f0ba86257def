"""Keeping the memory index in shape: a schema that gained a field since it was built, and
waiting for RediSearch to finish indexing (moving to another embedder: memory/moving.py)."""

from __future__ import annotations

import asyncio
import logging

import redis.asyncio as aioredis
from redisvl.index import AsyncSearchIndex

log = logging.getLogger(__name__)


async def add_origin(redis: aioredis.Redis, index: AsyncSearchIndex) -> None:
    """Indexes from before `origin` existed gain the field in place; their memories have
    none, which counts as remembered (never evicted). RedisVL cannot alter an index."""
    try:
        await redis.execute_command("FT.ALTER", index.name, "SCHEMA", "ADD", "origin", "TAG")
        log.info("memory index %s gained the origin field", index.name)
    except aioredis.ResponseError as exc:
        if "duplicate" not in str(exc).lower():
            raise


async def wait_indexed(index: AsyncSearchIndex, poll: float = 0.2) -> None:
    """Wait for RediSearch's background scan of existing documents: until it ends, recall
    would miss memories. It announces nothing, so ask it."""
    while True:
        info = await index.info()
        if float(info.get("percent_indexed", 1)) >= 1 and not int(info.get("indexing", 0)):
            return
        await asyncio.sleep(poll)
