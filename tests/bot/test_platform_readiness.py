"""`/readyz` tells the truth about the platforms: signed in, receiving, and their APIs
answering. The real SDKs against the fake Telegram and Slack, on the internal port."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis

from adapters.base import ConversationKey, DeliveryFailed, OutboundMessage
from bot.config import Settings
from bot.ops.http import HttpServer
from bot.runtime.inbox import Inbox
from bot.runtime.keys import Keys
from bot.wiring.connection import redis_client
from bot.wiring.platforms import Platforms
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram
from tests.private_redis import private_redis


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@contextlib.asynccontextmanager
async def gateway(
    redis: aioredis.Redis, **sections: dict[str, Any]
) -> AsyncIterator[tuple[Platforms, Callable[[], Awaitable[tuple[int, str]]]]]:
    settings = Settings.load(
        env_file=None, http={"PARLEY_PLATFORM_DEGRADED_AFTER": 0.5}, **sections
    )
    keys = Keys()
    platforms = Platforms(settings, redis, keys, Inbox(redis, keys, dedup_ttl=60).submit)
    server = HttpServer("127.0.0.1", 0)
    platforms.register_routes(server)
    await server.start()
    stop = asyncio.Event()
    try:
        await platforms.start_receiving(stop)
        server.add_check("platforms", platforms.check)
        async with aiohttp.ClientSession() as http:

            async def readyz() -> tuple[int, str]:
                url = f"http://127.0.0.1:{server.metrics_port}/readyz"
                async with http.get(url) as answer:
                    body = await answer.json()
                    return answer.status, str(body["checks"]["platforms"]["detail"])

            yield platforms, readyz
    finally:
        stop.set()
        await platforms.close()
        await server.stop()


async def until_ready(
    readyz: Callable[[], Awaitable[tuple[int, str]]], status: int, within: float = 30.0
) -> str:
    deadline = time.monotonic() + within
    while True:
        got, detail = await readyz()
        if got == status:
            return detail
        assert time.monotonic() < deadline, f"readyz stayed {got}: {detail}"
        await asyncio.sleep(0.1)


async def test_signed_in_is_not_ready_until_the_polling_lease_has_an_answer(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    """Between getMe and the first try for the polling lease nobody receives: not ready. A
    replica that finds another one polling is ready (it stands by)."""
    config = {"TELEGRAM_BOT_TOKEN": telegram.token, "TELEGRAM_API_URL": telegram.url}
    settings = Settings.load(env_file=None, telegram=config)
    keys = Keys()
    first = Platforms(settings, redis, keys, Inbox(redis, keys, dedup_ttl=60).submit)
    second = Platforms(settings, redis, keys, Inbox(redis, keys, dedup_ttl=60).submit)
    stop = asyncio.Event()
    try:
        await first.start_receiving(stop)
        assert first.telegram is not None and first.telegram.me is not None  # signed in
        assert await first.check() == (False, "telegram: polling: trying for the polling lease")
        ready, detail = await until_checked(first)
        assert ready and "polling: last getUpdates" in detail
        await second.start_receiving(stop)
        assert not (await second.check())[0]
        ready, detail = await until_checked(second)
        assert ready and detail == "telegram: signed in as @parley_bot"
        assert second.telegram is not None and not second.telegram.polling
    finally:
        stop.set()
        await second.close()
        await first.close()


async def test_redis_away_as_polling_starts_is_not_ready_until_it_is_back(
    telegram: FakeTelegram, tmp_path: Path
) -> None:
    """Nobody can know who polls while the lease cannot be asked: not ready, and ready with
    polling running once Redis is back."""
    config = {"TELEGRAM_BOT_TOKEN": telegram.token, "TELEGRAM_API_URL": telegram.url}
    settings = Settings.load(env_file=None, telegram=config)
    keys = Keys()
    stop = asyncio.Event()
    async with private_redis(tmp_path / "redis") as server:
        client = redis_client(server.url, settings)
        platforms = Platforms(settings, client, keys, Inbox(client, keys, dedup_ttl=60).submit)
        try:
            await server.down()
            await platforms.start_receiving(stop)
            await asyncio.sleep(1.5)  # tries, and fails, for the lease
            assert await platforms.check() == (
                False,
                "telegram: polling: trying for the polling lease",
            )
            await server.up()
            ready, detail = await until_checked(platforms)
            assert ready and "polling: last getUpdates" in detail
        finally:
            stop.set()
            await platforms.close()
            await client.aclose()


async def until_checked(platforms: Platforms, within: float = 30.0) -> tuple[bool, str]:
    deadline = time.monotonic() + within
    while True:
        ready, detail = await platforms.check()
        if ready or time.monotonic() > deadline:
            return ready, detail
        await asyncio.sleep(0.05)


async def test_telegram_polling_that_keeps_failing_makes_the_gateway_not_ready(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    async with gateway(
        redis,
        telegram={
            "TELEGRAM_BOT_TOKEN": telegram.token,
            "TELEGRAM_API_URL": telegram.url,
            "PARLEY_TELEGRAM_POLL_TIMEOUT": 1,
        },
    ) as (platforms, readyz):
        detail = await until_ready(readyz, 200)
        assert "telegram: polling: last getUpdates" in detail
        telegram.answer_error("getUpdates", 502, "Bad Gateway", times=10_000)
        detail = await until_ready(readyz, 503)
        assert "telegram" in detail and "degraded" in detail and "getUpdates" in detail
        telegram.errors["getUpdates"].clear()  # Telegram is back
        detail = await until_ready(readyz, 200)
        assert "degraded" not in detail and platforms.telegram is not None
        assert platforms.telegram.polling


async def test_slack_whose_api_fails_for_a_while_is_degraded_until_it_answers(
    redis: aioredis.Redis,
) -> None:
    async with FakeSlack() as fake:
        slack = {
            "SLACK_BOT_TOKEN": "xoxb-test",
            "SLACK_SIGNING_SECRET": "secret",
            "SLACK_API_URL": fake.api_url,
        }
        async with gateway(redis, slack=slack) as (platforms, readyz):
            assert await until_ready(readyz, 200) == "slack: events on /slack/events"
            adapter = platforms.adapters["slack"]
            where = ConversationKey(platform="slack", chat_id="CGEN")
            fake.answer_error("chat.postMessage", "internal_error", times=100)
            deadline = time.monotonic() + 30
            while (await readyz())[0] == 200:  # failing sends, until it has lasted a while
                assert time.monotonic() < deadline
                try:
                    await adapter.send(where, OutboundMessage(text="hello"))
                except DeliveryFailed:
                    pass
                await asyncio.sleep(0.1)
            status, detail = await readyz()
            assert status == 503 and "slack: degraded" in detail and "internal_error" in detail
            fake.errors["chat.postMessage"].clear()
            await adapter.send(where, OutboundMessage(text="hello again"))
            assert await until_ready(readyz, 200) == "slack: events on /slack/events"


async def test_a_platform_that_never_signed_in_is_not_ready(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    settings = Settings.load(
        env_file=None,
        telegram={"TELEGRAM_BOT_TOKEN": telegram.token, "TELEGRAM_API_URL": telegram.url},
    )
    keys = Keys()
    platforms = Platforms(settings, redis, keys, None)
    try:
        ready, detail = await platforms.check()
        assert not ready and "getMe" in detail
        assert platforms.telegram is not None
        await platforms.telegram.initialize()
        ready, detail = await platforms.check()
        assert ready and "signed in as @parley_bot" in detail
    finally:
        await platforms.close()
