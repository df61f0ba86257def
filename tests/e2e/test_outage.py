"""A real `parley worker` process while its Redis goes away and comes back: nothing queued is
lost or answered twice, `/readyz` tells, and the log says so once each way."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from adapters.base import Actor, ConversationKey, InboundMessage
from bot.ops.embedded_redis import EmbeddedRedis
from bot.ops.embedded_redis import free_port as free_redis_port
from bot.runtime.inbox import Inbox
from bot.runtime.keys import Keys
from tests.e2e.test_processes import Cluster, free_port, script, texts, until
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram

pytestmark = pytest.mark.e2e

CHAT = 42


def hello(index: int, text: str = "") -> InboundMessage:
    chat = ConversationKey(platform="telegram", chat_id=str(CHAT))
    return InboundMessage(
        event_id=f"outage-{index}",
        conversation=chat,
        actor=Actor(platform="telegram", user_id=str(CHAT), name="Ana"),
        text=text or f"hello {index}",
        is_direct=True,
    )


async def status(url: str) -> int:
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.get(url, timeout=aiohttp.ClientTimeout(total=10)) as response,
        ):
            return response.status
    except (aiohttp.ClientError, TimeoutError):
        return 0


async def until_status(url: str, expected: int, within: float) -> None:
    deadline = time.monotonic() + within
    while await status(url) != expected:
        assert time.monotonic() < deadline, f"{url} never answered {expected}"
        await asyncio.sleep(0.2)


@pytest.fixture
async def private_redis(tmp_path: Path) -> AsyncIterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path / "redis", persistent=True, port=free_redis_port())
    await asyncio.to_thread(server.start)
    try:
        yield server
    finally:
        await asyncio.to_thread(server.stop)


async def test_a_worker_rides_out_a_redis_outage(
    private_redis: EmbeddedRedis, tmp_path: Path
) -> None:
    # The test's own client reconnects by itself after the restart (as a platform would retry).
    client = aioredis.Redis.from_url(
        private_redis.url, retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 10)
    )
    inbox = Inbox(client, Keys(), dedup_ttl=600)
    async with FakeTelegram() as telegram, FakeAnthropic() as hosted:
        hosted.responder = script
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("PARLEY_", "ANTHROPIC_", "OLLAMA_", "TELEGRAM_", "SLACK_"))
        }
        port = free_port()
        cluster = Cluster(
            {
                **base,
                "REDIS_URL": private_redis.url,
                "TELEGRAM_BOT_TOKEN": telegram.token,
                "PARLEY_TELEGRAM_ACCESS": "open",  # these tests talk as anyone
                "TELEGRAM_API_URL": telegram.url,
                "ANTHROPIC_API_KEY": "sk-ant-test",
                "ANTHROPIC_BASE_URL": hosted.url,
                "OLLAMA_HOST": f"http://127.0.0.1:{free_port()}",
                "PARLEY_RECLAIM_IDLE": "1",
                "PARLEY_LOCK_LEASE": "2",
                "PARLEY_RATE_LIMIT_PER_MINUTE": "1000",
            },
            tmp_path,
        )
        try:
            worker = await cluster.start("worker", PARLEY_METRICS_PORT=str(port))
            await cluster.ready(worker)
            ready = f"http://127.0.0.1:{port}/readyz"
            await until_status(ready, 200, within=30)
            for index in range(3):
                await inbox.submit(hello(index))
            await until(lambda: len(telegram.chat(CHAT)) == 3)
            # one run is under way (the model takes 3 s) when Redis goes away
            await inbox.submit(hello(3, "slow one"))
            await asyncio.sleep(1)
            await asyncio.to_thread(private_redis.stop)
            await until_status(ready, 503, within=30)
            await asyncio.sleep(3)
            await asyncio.to_thread(private_redis.start)
            await until_status(ready, 200, within=60)
            for index in range(4, 7):
                await inbox.submit(hello(index))
            await until(lambda: len(telegram.chat(CHAT)) >= 7, within=60)
            await asyncio.sleep(2)  # nothing more arrives
            assert texts(telegram, CHAT) == [
                "echo: hello 0",
                "echo: hello 1",
                "echo: hello 2",
                "slow answer to slow one",
                "echo: hello 4",
                "echo: hello 5",
                "echo: hello 6",
            ]
            assert await cluster.stop(worker) == 0
        finally:
            await cluster.stop_all()
            await client.aclose()
    log = await asyncio.to_thread((tmp_path / "worker-0.log").read_text)
    assert log.count("worker degraded") == 1, log
    assert log.count("worker recovered after") == 1, log
