from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from memory import Embedder, RedisMemoryStore, open_store


@pytest.fixture
async def store(redis: aioredis.Redis, embedder: Embedder) -> AsyncIterator[RedisMemoryStore]:
    yield await open_store(redis, embedder)
