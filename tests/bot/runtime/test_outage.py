"""Redis goes away mid-traffic and comes back: a private Redis Stack server, stopped and
started again on the same port, under the real runtime."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest
import redis.asyncio as aioredis

from adapters.base import HandoverFailed
from bot.conversation.engine import ERROR_TEXT
from bot.ops.embedded_redis import EmbeddedRedis, free_port
from bot.ops.health import REDIS_DOWN, Health
from bot.ops.http import HttpServer
from bot.runtime.keys import Keys
from bot.runtime.locks import ConversationLocks
from bot.wiring.app import _redis_check
from bot.wiring.connection import redis_client
from tests.agent.scripted import ScriptedModel
from tests.bot.harness import running, settings
from tests.bot.recording import dm, message
from tests.bot.runtime.test_faults import echo, until

pytestmark = pytest.mark.network


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path / "outage", persistent=True, port=free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def client(private_redis: EmbeddedRedis) -> AsyncIterator[aioredis.Redis]:
    redis = redis_client(private_redis.url, settings())
    try:
        yield redis
    finally:
        await redis.aclose()


async def readiness(base: str) -> int:
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"{base}/readyz", timeout=aiohttp.ClientTimeout(total=10)) as response,
        ):
            return response.status
    except (aiohttp.ClientError, TimeoutError):
        return 0


async def until_ready_is(base: str, status: int, within: float) -> None:
    deadline = time.monotonic() + within
    while await readiness(base) != status:
        assert time.monotonic() < deadline, f"/readyz never answered {status}"
        await asyncio.sleep(0.1)


async def test_a_redis_outage_mid_traffic_loses_nothing_and_readiness_tells(
    private_redis: EmbeddedRedis, client: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bot.ops.health")
    model = ScriptedModel([echo] * 400)
    health = Health()
    server = HttpServer("127.0.0.1", 0)
    server.add_check("redis", _redis_check(client))
    server.add_check("loops", health.readiness)
    await server.start()
    base = f"http://127.0.0.1:{server.metrics_port}"
    accepted: list[str] = []
    enough = asyncio.Event()

    async def produce(harness) -> None:  # type: ignore[no-untyped-def]
        # Like a platform: one message every 50 ms in five chats; a failed submit is not
        # accepted (the platform would redeliver it).
        for index in range(300):
            if enough.is_set():
                return
            text = f"m{index}"
            try:
                if await harness.submit(message(dm(str(100 + index % 5)), text)):
                    accepted.append(text)
            except (HandoverFailed, *REDIS_DOWN):
                pass
            await asyncio.sleep(0.05)

    try:
        async with running(client, model, health=health) as harness:
            producer = asyncio.create_task(produce(harness))
            await until_ready_is(base, 200, within=20)
            await until(lambda: _at_least(accepted, 10))
            await asyncio.to_thread(private_redis.stop)
            await until_ready_is(base, 503, within=20)
            await asyncio.sleep(3)
            before_restart = len(accepted)
            await asyncio.to_thread(private_redis.start)
            await until_ready_is(base, 200, within=30)
            await until(lambda: _at_least(accepted, before_restart + 10))
            enough.set()
            await producer
            await harness.settle(within=60)
            # every loop the outage touched says it is back before the runtime stops
            touched = ("reclaimer", "reminders", "redelivery")
            await until(lambda: _all_ok(health, touched), within=30)

            replies = Counter(harness.adapter.texts())
            assert ERROR_TEXT not in replies
            for text in accepted:
                assert replies[f"re: {text}"] == 1, f"{text} answered {replies[f're: {text}']}x"
            assert all(count == 1 for count in replies.values())
            assert harness.runtime.worker.reading.state == "ok"
    finally:
        await server.stop()

    lines = [r.getMessage() for r in caplog.records if r.name == "bot.ops.health"]
    worker_lines = [line for line in lines if line.startswith("worker ")]
    assert len(worker_lines) == 2, worker_lines  # one when it degraded, one when it recovered
    assert worker_lines[0].startswith("worker degraded")
    assert worker_lines[1].startswith("worker recovered after")
    for loop in ("reclaimer", "reminders", "redelivery"):  # every loop rode it out too
        degraded = [line for line in lines if line.startswith(f"{loop} degraded")]
        recovered = [line for line in lines if line.startswith(f"{loop} recovered after")]
        assert len(degraded) == len(recovered) <= 1, (loop, lines)


async def _all_ok(health: Health, names: tuple[str, ...]) -> bool:
    return all(health.loops[name].state == "ok" for name in names)


async def _at_least(items: list[str], count: int) -> bool:
    return len(items) >= count


CHAT = "telegram:-:1:-"


async def test_a_lock_is_kept_through_a_short_outage(
    private_redis: EmbeddedRedis, client: aioredis.Redis
) -> None:
    keys = Keys()
    locks = ConversationLocks(client, keys, lease=4, ttl=60)
    locks.renew_every = 0.1  # renewals come often, so the test need not wait out the lease
    async with locks.held(CHAT) as lease:
        assert lease is not None
        await asyncio.to_thread(private_redis.stop)
        await asyncio.sleep(1)  # renewals fail meanwhile
        await asyncio.to_thread(private_redis.start)
        # Without a renewal after the outage at most 3 s of the lease would be left: more means
        # the renewer rode the outage out and renewed once Redis was back.
        await until(lambda: _lease_left_above(client, keys, 3500))
        assert not lease.lost
        assert await client.get(keys.lock(CHAT)) == lease.fence.value.encode()
    assert not await client.exists(keys.lock(CHAT))


async def _lease_left_above(client: aioredis.Redis, keys: Keys, ms: int) -> bool:
    try:
        return int(await client.pttl(keys.lock(CHAT))) > ms
    except REDIS_DOWN:
        return False


async def test_a_lock_whose_release_failed_in_an_outage_is_not_left_stuck(
    private_redis: EmbeddedRedis, client: aioredis.Redis
) -> None:
    keys = Keys()
    locks = ConversationLocks(client, keys, lease=60, ttl=600)
    async with locks.held(CHAT) as lease:
        assert lease is not None
        await asyncio.to_thread(private_redis.stop)
    await asyncio.to_thread(private_redis.start)
    assert await client.get(keys.lock(CHAT)) == lease.fence.value.encode()  # the release failed
    again = await locks.try_acquire(CHAT)  # ...but this process does not wait a lease out
    assert again is not None and again.fence.token > lease.fence.token


async def test_connections_a_restart_left_stale_fail_no_command(
    private_redis: EmbeddedRedis, client: aioredis.Redis
) -> None:
    # twenty pooled connections, all cut when the server restarts
    await asyncio.gather(*(client.set(f"k{i}", i) for i in range(20)))
    await asyncio.to_thread(private_redis.stop)
    await asyncio.to_thread(private_redis.start)
    values = await asyncio.gather(*(client.get(f"k{i}") for i in range(20)))
    assert values == [str(i).encode() for i in range(20)]
