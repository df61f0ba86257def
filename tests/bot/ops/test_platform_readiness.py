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
from bot.wiring.platforms import NO_PLATFORM, Platforms
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram
from tests.private_redis import private_redis


class Readyz:
    """`/readyz` as a probe sees it: the status and the platforms' detail; `checks` keeps the
    last answer's every check."""

    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        self.http, self.url = http, url
        self.checks: dict[str, dict[str, Any]] = {}

    async def __call__(self) -> tuple[int, str]:
        async with self.http.get(self.url) as answer:
            self.checks = (await answer.json())["checks"]
            return answer.status, str(self.checks["platforms"]["detail"])


@contextlib.asynccontextmanager
async def gateway(
    redis: aioredis.Redis, **sections: dict[str, Any]
) -> AsyncIterator[tuple[Platforms, Readyz]]:
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
        platforms.register_checks(server)
        async with aiohttp.ClientSession() as http:
            yield platforms, Readyz(http, f"http://127.0.0.1:{server.metrics_port}/readyz")
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


async def until_checked_as(readyz: Readyz, name: str, ok: bool, within: float = 30.0) -> int:
    """Probe until the check `name` reads `ok`; the status /readyz answered then."""
    deadline = time.monotonic() + within
    while True:
        status, _ = await readyz()
        if readyz.checks[name]["ok"] is ok:
            return status
        assert time.monotonic() < deadline, f"{name} stayed {readyz.checks[name]}"
        await asyncio.sleep(0.1)


def both(telegram: FakeTelegram, slack: FakeSlack) -> dict[str, dict[str, Any]]:
    return {
        "telegram": {
            "TELEGRAM_BOT_TOKEN": telegram.token,
            "TELEGRAM_API_URL": telegram.url,
            "PARLEY_TELEGRAM_POLL_TIMEOUT": 1,
        },
        "slack": {
            "SLACK_BOT_TOKEN": "xoxb-test",
            "SLACK_SIGNING_SECRET": "secret",
            "SLACK_API_URL": slack.api_url,
        },
    }


async def test_a_telegram_outage_makes_only_telegram_not_ready(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    """Telegram answering 502, then refusing connections: /readyz stays 200 for the gateway
    (Slack still receives), its `telegram` check says why; both come back by themselves."""
    async with FakeSlack() as slack, gateway(redis, **both(telegram, slack)) as (_, readyz):
        await until_ready(readyz, 200)
        assert readyz.checks["slack"] == {
            "ok": True,
            "detail": "events on /slack/events",
            "required": False,
        }
        # /readyz is 200 once Slack receives; Telegram signs in and polls on its own time
        assert await until_checked_as(readyz, "telegram", True) == 200

        telegram.answer_error("getUpdates", 502, "Bad Gateway", times=10_000)
        assert await until_checked_as(readyz, "telegram", False) == 200
        assert "degraded" in readyz.checks["telegram"]["detail"]
        assert readyz.checks["slack"]["ok"] is True and readyz.checks["platforms"]["ok"] is True
        telegram.errors["getUpdates"].clear()
        assert await until_checked_as(readyz, "telegram", True) == 200

        port = telegram.port
        await telegram.stop()  # connections refused
        assert await until_checked_as(readyz, "telegram", False) == 200
        assert "slack: events on /slack/events" in readyz.checks["platforms"]["detail"]
        await telegram.start(port)
        assert await until_checked_as(readyz, "telegram", True) == 200


async def test_telegram_down_at_start_leaves_slack_serving_and_signs_in_when_back(
    redis: aioredis.Redis, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    port = telegram.port
    await telegram.stop()
    async with FakeSlack() as slack, gateway(redis, **both(telegram, slack)) as (_, readyz):
        assert await until_checked_as(readyz, "slack", True) == 200
        assert readyz.checks["telegram"] == {
            "ok": False,
            "detail": "not signed in yet (getMe has not succeeded)",
            "required": False,
        }
        assert "telegram could not start (NetworkError)" in caplog.text
        await telegram.start(port)
        assert await until_checked_as(readyz, "telegram", True) == 200
        assert "polling" in readyz.checks["telegram"]["detail"]


async def test_with_no_platform_readyz_says_so(redis: aioredis.Redis, tmp_path: Path) -> None:
    """Nothing can reach a gateway with no platform: not ready, and the reason names the
    settings; with triggers it still receives, so it is ready and says what it lacks."""
    async with gateway(redis) as (platforms, readyz):
        status, detail = await readyz()
        assert (status, detail) == (503, NO_PLATFORM)
        assert "SLACK_BOT_TOKEN" in detail and "TELEGRAM_BOT_TOKEN" in detail
        assert set(readyz.checks) == {"platforms"}
    triggers = tmp_path / "triggers.json"
    triggers.write_text("{}")
    async with gateway(redis, schedules={"PARLEY_TRIGGERS_CONFIG": str(triggers)}) as (_, readyz):
        status, detail = await readyz()
        assert status == 200 and detail.startswith("no chat platform configured;")
