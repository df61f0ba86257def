"""The loops' heartbeats as `/readyz` and `/healthz` report them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import aiohttp
import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from bot.ops.health import Backoff, Health
from bot.ops.http import HttpServer

pytestmark = pytest.mark.network


@pytest.fixture
async def served() -> AsyncIterator[tuple[Health, str]]:
    health = Health()
    server = HttpServer("127.0.0.1", 0)
    server.add_check("loops", health.readiness)
    server.add_liveness_check("loops", health.liveness)
    await server.start()
    try:
        yield health, f"http://127.0.0.1:{server.metrics_port}"
    finally:
        await server.stop()


async def probe(base: str, path: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    async with aiohttp.ClientSession() as http, http.get(f"{base}{path}") as response:
        return response.status, await response.json()


async def test_a_loop_that_died_fails_health_so_the_process_is_restarted(served) -> None:
    health, base = served

    async def broken() -> None:
        raise RuntimeError("a bug")

    heartbeat = health.register("reminders", every=30)
    task = asyncio.create_task(broken())
    health.watch(heartbeat, task)
    with pytest.raises(RuntimeError):
        await task
    await asyncio.sleep(0)  # done callbacks run on the next loop turn
    status, body = await probe(base, "/healthz")
    assert status == 503
    assert body["checks"]["loops"]["detail"] == "reminders dead: RuntimeError"
    status, body = await probe(base, "/readyz")
    assert status == 503 and "reminders dead" in body["checks"]["loops"]["detail"]


async def test_a_wedged_loop_is_not_ready_but_alive(served) -> None:
    health, base = served
    now = [1000.0]
    health.clock = lambda: now[0]  # the heartbeats' clock, moved on instead of waited out
    heartbeat = health.register("worker", every=2.0)
    now[0] += 2.1
    assert (await probe(base, "/readyz"))[0] == 200  # not started yet, so not stuck
    heartbeat.beat()
    now[0] += 1.9
    assert (await probe(base, "/readyz"))[0] == 200
    now[0] += 0.2  # no beat for 2.1 s
    status, body = await probe(base, "/readyz")
    assert status == 503 and "worker wedged" in body["checks"]["loops"]["detail"]
    assert (await probe(base, "/healthz"))[0] == 200


async def test_a_loop_that_stopped_cleanly_is_neither_dead_nor_wedged(served) -> None:
    health, base = served

    async def finishes() -> None:
        return None

    heartbeat = health.register("gauges", every=0.1)
    task = asyncio.create_task(finishes())
    health.watch(heartbeat, task)
    await task
    await asyncio.sleep(0.2)
    assert (await probe(base, "/readyz"))[0] == 200
    assert (await probe(base, "/healthz"))[0] == 200


async def test_degradation_and_recovery_are_logged_once_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    heartbeat = Health().register("worker", every=30)
    caplog.set_level(logging.INFO, logger="bot.ops.health")
    delays = [heartbeat.failed(RedisConnectionError("refused")) for _ in range(8)]
    assert heartbeat.state == "degraded"
    assert heartbeat.reason == "Redis unreachable: ConnectionError"
    assert heartbeat.beat() is True
    assert heartbeat.beat() is False
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert lines[0].startswith("worker degraded (Redis unreachable: ConnectionError)")
    assert lines[1].startswith("worker recovered after")
    # bounded exponential backoff with jitter
    assert delays[0] <= 0.1 and all(d <= 5.0 for d in delays) and delays[-1] >= 2.5


def test_backoff_grows_to_its_cap_and_resets() -> None:
    backoff = Backoff(first=0.1, cap=5.0)
    delays = [backoff.next() for _ in range(12)]
    assert all(0.05 <= d <= 5.0 for d in delays)
    assert max(delays[-3:]) >= 2.5
    backoff.reset()
    assert backoff.next() <= 0.1


def test_redis_away_is_seen_through_wrapping_errors() -> None:
    from bot.ops.health import redis_away

    def wrapped() -> Exception:
        try:
            try:
                raise RedisConnectionError("refused")
            except RedisConnectionError as exc:
                raise RuntimeError("index query failed") from exc
        except RuntimeError as outer:
            return outer

    assert redis_away(RedisConnectionError("refused"))
    assert redis_away(wrapped())
    assert not redis_away(RuntimeError("a bug"))


def test_a_loop_bug_is_traced_once_per_degradation(caplog: pytest.LogCaptureFixture) -> None:
    heartbeat = Health().register("reclaimer", every=30)
    caplog.set_level(logging.INFO, logger="bot.ops.health")
    for _ in range(3):
        heartbeat.failed(KeyError("field"))
    traced = [r for r in caplog.records if r.exc_info]
    assert len(traced) == 1 and traced[0].getMessage() == "reclaimer pass failed"
    assert heartbeat.reason == "KeyError"
    assert len(caplog.records) == 2  # the trace and the one degraded line
