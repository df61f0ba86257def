"""The test servers' own harness: a `down` during an `up` stops the server that came up."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError

from tests.private_redis import PrivateRedis

pytestmark = pytest.mark.process


async def test_down_while_up_is_still_starting_stops_that_server(tmp_path: Path) -> None:
    server = PrivateRedis(tmp_path)
    starting = asyncio.create_task(server.up())
    await asyncio.sleep(0)  # `up` has begun and waits for the server to answer
    await server.down()
    await starting
    client = aioredis.Redis.from_url(server.url)
    try:
        with pytest.raises(RedisConnectionError):
            await client.ping()
    finally:
        await client.aclose()
