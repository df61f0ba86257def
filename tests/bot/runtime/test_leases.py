"""The Telegram polling lease: one gateway polls; a clean stop hands it over at once, and a
Redis outage neither ends the lease loop nor leaves two pollers."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bot.config import Settings
from bot.ops.health import Health
from bot.runtime.keys import Keys
from bot.runtime.leases import Lease
from bot.wiring.platforms import Platforms
from tests.fakes.telegram import FakeTelegram
from tests.private_redis import private_redis


def gateway(redis: aioredis.Redis, telegram: FakeTelegram) -> Platforms:
    settings = Settings.load(
        env_file=None,
        telegram={
            "TELEGRAM_BOT_TOKEN": telegram.token,
            "TELEGRAM_API_URL": telegram.url,
            "PARLEY_TELEGRAM_POLL_TIMEOUT": 1,
        },
    )

    async def handler(event: object) -> None:
        return None

    return Platforms(settings, redis, Keys(), handler)


async def until(predicate: Callable[[], bool], within: float = 20.0) -> float:
    started = time.monotonic()
    while not predicate():
        assert time.monotonic() - started < within, "timed out waiting"
        await asyncio.sleep(0.02)
    return time.monotonic() - started


async def test_a_clean_stop_hands_the_polling_lease_over_at_once(redis) -> None:
    async with FakeTelegram() as telegram:
        first, second = gateway(redis, telegram), gateway(redis, telegram)
        try:
            await first.start_receiving(asyncio.Event())
            assert first.telegram is not None and second.telegram is not None
            await until(lambda: first.telegram.polling)
            await second.start_receiving(asyncio.Event())
            await asyncio.sleep(1.5)
            assert not second.telegram.polling  # one poller at a time
            assert await redis.get("parley:lease:telegram-polling") is not None

            # left alone, the lease would pass on only once it expires
            expires = await redis.pttl("parley:lease:telegram-polling") / 1000
            assert expires > 5
            await first.close()
            assert not first.telegram.polling
            waited = await until(lambda: second.telegram.polling)
            assert waited < expires, f"the second gateway waited {waited:.1f} s for the lease"
            ok, detail = await second.check()
            assert ok and "telegram: polling: last getUpdates" in detail
        finally:
            await first.close()
            await second.close()
        assert await redis.get("parley:lease:telegram-polling") is None


@pytest.mark.network
async def test_the_lease_outlives_a_redis_outage(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bot.ops.health")
    events: list[str] = []

    async def acquired() -> None:
        events.append("acquired")

    async def lost() -> None:
        events.append("lost")

    async with private_redis(tmp_path) as server:
        client = server.client()
        health = Health()
        lease = Lease(client, "parley:lease:test", ttl=2.0, retry=0.2, health=health)
        stop = asyncio.Event()
        task = asyncio.create_task(lease.hold_while(stop, acquired, lost))
        health.watch(lease.heartbeat, task)
        try:
            await until(lambda: events == ["acquired"])
            await server.down()  # shorter than the lease: still ours
            await until(lambda: lease.heartbeat.state == "degraded")
            assert (await health.readiness())[0]  # degraded is still ready
            await asyncio.sleep(0.5)
            await server.up()
            await until(lambda: lease.heartbeat.state == "ok")
            await asyncio.sleep(1.0)
            assert events == ["acquired"] and lease.held and not task.done()
            lines = [r.getMessage() for r in caplog.records if "lease test" in r.getMessage()]
            assert len(lines) == 2, lines  # one when it degraded, one when it recovered
            assert "degraded" in lines[0] and "recovered" in lines[1]

            await server.down()  # longer than the lease: given up, then won again
            await until(lambda: events == ["acquired", "lost"])
            await server.up()
            await until(lambda: events == ["acquired", "lost", "acquired"])
            assert lease.held and not task.done()
        finally:
            stop.set()
            await task
            assert await client.get("parley:lease:test") is None
            await client.aclose()
        assert events == ["acquired", "lost", "acquired", "lost"]
