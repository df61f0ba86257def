"""Redis is the trust root (whoever writes to it can forge an approval), so Parley reaches a
Redis that asks for a password with REDIS_PASSWORD, and its embedded server asks for one too
when it is set, without showing it to other local users on the command line."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from bot.config import Settings
from bot.ops.checks import check_redis
from bot.ops.embedded_redis import EmbeddedRedis
from bot.wiring.connection import redis_connection

pytestmark = pytest.mark.process

PASSWORD = 'c0rrect horse "battery" \\ staple'


def command_lines() -> list[bytes]:
    """What every local user can read of each process's command line."""
    found = []
    for path in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            found.append(path.read_bytes())
        except OSError:
            pass  # it ended meanwhile
    return found


def settings(**redis_values: object) -> Settings:
    return Settings.load(env_file=None, redis=redis_values)


async def test_parley_reaches_a_redis_that_asks_for_a_password(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path, persistent=False, password=PASSWORD)
    url = await asyncio.to_thread(server.start)
    try:
        anonymous = aioredis.Redis.from_url(url)
        with pytest.raises(redis.AuthenticationError):
            await anonymous.set("parley:decision:forged", "approved")
        await anonymous.aclose()

        async with redis_connection(settings(REDIS_URL=url, REDIS_PASSWORD=PASSWORD)) as client:
            assert await client.ping()
        assert (await check_redis(settings(REDIS_URL=url, REDIS_PASSWORD=PASSWORD))).status == "ok"
        refused = await check_redis(settings(REDIS_URL=url))
        assert refused.status == "fail" and PASSWORD not in refused.detail
        # a password in the URL wins over REDIS_PASSWORD
        wrong = settings(REDIS_URL=url.replace("//", "//:wrong-one@"), REDIS_PASSWORD=PASSWORD)
        assert (await check_redis(wrong)).status == "fail"
    finally:
        await asyncio.to_thread(server.stop)


async def test_the_embedded_server_asks_for_the_password_and_hides_it(tmp_path: Path) -> None:
    config = settings(PARLEY_DATA_DIR=str(tmp_path), REDIS_PASSWORD=PASSWORD)
    async with redis_connection(config) as client:
        assert await client.set("k", "v")
        where = client.connection_pool.connection_kwargs
        url = f"redis://{where['host']}:{where['port']}"
        anonymous = redis.Redis.from_url(url)
        with pytest.raises(redis.AuthenticationError):
            anonymous.get("k")
        anonymous.close()
        auth = tmp_path / "redis" / "auth.conf"
        assert auth.stat().st_mode & 0o077 == 0  # readable by this user alone
        cmdlines = command_lines()
        port = url.rsplit(":", 1)[1].split("/")[0].encode()
        servers = [c for c in cmdlines if b"redis" in c and b":" + port in c]
        assert servers, "the embedded server is running"
        assert not any(b"battery" in c for c in servers)
