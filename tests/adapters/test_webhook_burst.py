"""A burst of Telegram webhook posts against the service's bounded Redis pool: every update
waits for a free connection and is queued, none is answered with an error."""

from __future__ import annotations

import asyncio

import aiohttp
import redis.asyncio as aioredis

from adapters.telegram import TelegramAdapter, TelegramConfig
from bot.config import Settings
from bot.ops.http import HttpServer
from bot.runtime.inbox import Inbox
from bot.runtime.keys import Keys
from bot.wiring.connection import redis_client
from tests.fakes.telegram import FakeTelegram

BURST = 500
SECRET = "burst-secret"


async def test_a_burst_of_webhook_posts_queues_every_update(
    redis_url: str, redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    # Far fewer connections than concurrent requests, so the burst must queue for them. The
    # waits are bounded generously: on a loaded machine the last of 500 can wait longer than
    # the shipped bounds (5 s to store, 10 s for a connection), and a 503 then is Telegram's
    # cue to redeliver; what must never happen is a refusal for want of a connection.
    config = Settings.load(
        env_file=None,
        redis={"PARLEY_REDIS_MAX_CONNECTIONS": 8, "PARLEY_REDIS_POOL_TIMEOUT": 120},
    )
    client = redis_client(redis_url, config)
    adapter = TelegramAdapter(
        config=TelegramConfig(
            open_access=True,
            token=telegram.token,
            api_url=telegram.url,
            mode="webhook",
            webhook_url="https://parley.example.com/telegram/webhook",
            webhook_secret=SECRET,
            handover_timeout=120,
        ),
        handler=Inbox(client, Keys(), dedup_ttl=60).submit,
    )
    server = HttpServer("127.0.0.1", 0)
    server.add_route(*adapter.webhook_route())
    await adapter.start()
    await server.start()
    url = f"http://127.0.0.1:{server.port}/telegram/webhook"
    updates = [
        telegram.message(chat_id=5000 + i, user_id=5000 + i, text=f"burst {i}")
        for i in range(BURST)
    ]
    headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=BURST)) as http:

            async def post(update: dict) -> int:  # type: ignore[type-arg]
                async with http.post(url, json=update, headers=headers) as response:
                    return response.status

            statuses = await asyncio.gather(*(post(update) for update in updates))
    finally:
        await server.stop()
        await adapter.stop()
        await client.aclose()
    assert statuses.count(200) == BURST, sorted(set(statuses))
    assert await redis.xlen(Keys().inbox) == BURST
