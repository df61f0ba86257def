"""Fixtures for the runtime's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bot.wiring.connection import redis_client
from tests.bot.harness import settings
from tests.private_redis import PrivateRedis, private_redis


@pytest.fixture
async def stoppable(tmp_path: Path) -> AsyncIterator[tuple[PrivateRedis, aioredis.Redis]]:
    """A private Redis Stack server the test may stop and start again, and a client of it
    made as the service makes its own."""
    async with private_redis(tmp_path / "redis") as server:
        client = redis_client(server.url, settings())
        try:
            yield server, client
        finally:
            await client.aclose()
