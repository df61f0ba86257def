from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from memory import Embedder, RedisMemoryStore, local_embedder, open_store


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return local_embedder()


@pytest.fixture
async def store(redis: aioredis.Redis, embedder: Embedder) -> AsyncIterator[RedisMemoryStore]:
    yield await open_store(redis, embedder)
