"""Shared fixtures: one real Redis Stack server per test session, flushed between tests.

Under pytest-xdist each worker process starts its own server (this fixture is per process).
PARLEY_TEST_REDIS_URL runs the suite against another server instead, e.g. Redis 8 with its
built-in query engine: `PARLEY_TEST_REDIS_URL=redis://127.0.0.1:6379/0 make pytest` (serially,
one worker). It is flushed between tests, so point it only at a throwaway server.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import redis as syncredis
import redis.asyncio as aioredis

from bot.ops.embedded_redis import EmbeddedRedis
from tests.fakes.telegram import FakeTelegram

if TYPE_CHECKING:
    from memory import Embedder

pytest_plugins = ["tests.tiers", "tests.parallel"]

EXTERNAL_REDIS = os.environ.get("PARLEY_TEST_REDIS_URL") or None

# The tests must never read a developer's .env or reach a real service.
for _name in list(os.environ):
    if (
        _name.startswith(("PARLEY_", "SLACK_", "TELEGRAM_", "ANTHROPIC_", "OLLAMA_"))
        or _name == "REDIS_URL"
    ):
        del os.environ[_name]
os.environ["HF_HUB_OFFLINE"] = "1"


def pytest_configure(config: pytest.Config) -> None:
    # One shared server is flushed between tests: parallel workers would flush each other.
    workers = getattr(config.option, "numprocesses", None)
    if EXTERNAL_REDIS is not None and workers:
        raise pytest.UsageError(
            "PARLEY_TEST_REDIS_URL is one server flushed between tests: run it serially (-n 0)"
        )


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"), persistent=False)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def external_redis() -> str:
    """PARLEY_TEST_REDIS_URL, once checked to have the search module Parley's memory needs."""
    assert EXTERNAL_REDIS is not None
    client = syncredis.Redis.from_url(EXTERNAL_REDIS, socket_connect_timeout=5)
    try:
        modules = {m[b"name"].decode().lower() for m in client.module_list()}
    finally:
        client.close()
    assert "search" in modules, f"PARLEY_TEST_REDIS_URL has no search module: {modules}"
    return EXTERNAL_REDIS


@pytest.fixture
def redis_url(request: pytest.FixtureRequest) -> str:
    if EXTERNAL_REDIS is not None:
        return str(request.getfixturevalue("external_redis"))
    server: EmbeddedRedis = request.getfixturevalue("redis_server")
    return server.url


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


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    """The fake Telegram Bot API (`tests/fakes/telegram.py`), one per test."""
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The real local embedding model (installed with the project, never downloaded here),
    loaded once per test process."""
    from memory import local_embedder

    return local_embedder()
