"""Shared fixtures: one real Redis Stack server per test session, flushed between tests."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bot.embedded_redis import EmbeddedRedis

# The tests must never read a developer's .env or reach a real service.
for _name in list(os.environ):
    if (
        _name.startswith(("PARLEY_", "SLACK_", "TELEGRAM_", "ANTHROPIC_", "OLLAMA_"))
        or _name == "REDIS_URL"
    ):
        del os.environ[_name]
os.environ["HF_HUB_OFFLINE"] = "1"


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"), persistent=False)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: EmbeddedRedis) -> str:
    return redis_server.url


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    await client.flushall()
    try:
        yield client
    finally:
        await client.flushall()
        await client.aclose()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"
