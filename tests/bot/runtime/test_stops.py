"""Stop requests between processes: one process records and publishes, every process hears
it, and only a run begun before the request, by someone it lets stop it, is stopped. The
listener survives Redis going away and reads what it may have missed when it is back."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bot.ops.health import Health
from bot.runtime.keys import Keys
from bot.runtime.stops import RECORD, StopRequest, Stops
from bot.wiring.connection import redis_client
from tests.bot.harness import settings
from tests.private_redis import private_redis

CONVERSATION = "telegram:-:42:-"


def request(entry: str, user: str = "ana") -> StopRequest:
    return StopRequest(conversation_id=CONVERSATION, entry_id=entry, user_id=user)


def test_a_stop_request_keeps_the_stored_form_it_always_had() -> None:
    """Recorded and published requests read by processes of the release before, and theirs
    by this one: the short field names, groups left out when there were none."""
    written_before = (
        '{"conversation": "telegram:-:42:-", "entry": "21-0", "user": "ana", "groups": ["ops"]}'
    )
    assert RECORD.decode(written_before) == StopRequest(
        conversation_id=CONVERSATION, entry_id="21-0", user_id="ana", groups=("ops",)
    )
    assert RECORD.decode('{"conversation": "c", "entry": "1-0", "user": "u"}').groups == ()
    assert json.loads(RECORD.encode(request("21-0"))) == {
        "conversation": CONVERSATION,
        "entry": "21-0",
        "user": "ana",
        "groups": [],
    }


@contextlib.asynccontextmanager
async def listening(redis: aioredis.Redis) -> AsyncIterator[tuple[Stops, Health]]:
    """A process's stop listener, subscribed before it is handed over."""
    stops, health = Stops(redis, Keys("parley")), Health()
    beat = health.register("stops", every=30)
    stopping = asyncio.Event()
    task = asyncio.create_task(stops.listen(stopping, beat))
    try:
        for _ in range(500):
            if (await redis.pubsub_numsub("parley:stops"))[0][1]:
                break
            await asyncio.sleep(0.01)
        yield stops, health
    finally:
        stopping.set()
        await task


async def stopped(event: asyncio.Event, within: float = 5.0) -> bool:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), within)
    return event.is_set()


async def test_a_request_from_another_process_stops_a_run_begun_before_it(
    redis: aioredis.Redis,
) -> None:
    other = Stops(redis, Keys("parley"))
    async with listening(redis) as (stops, _):
        with stops.watching(CONVERSATION, "1000-0", lambda r: r.user_id == "ana") as watch:
            await other.request(request("999-5"))  # older than the run: not about it
            await other.request(request("1001-0", user="mallory"))  # not allowed to
            assert not await stopped(watch.stop, within=0.3)
            await other.request(request("1001-1"))
            assert await stopped(watch.stop)
            assert watch.by is not None and watch.by.entry_id == "1001-1"
    assert await redis.pttl(f"parley:conv:{{{CONVERSATION}}}:stop") > 0  # recorded, bounded


async def test_a_request_heard_before_the_run_started_still_stops_it(
    redis: aioredis.Redis,
) -> None:
    async with listening(redis) as (stops, _):
        await Stops(redis, Keys("parley")).request(request("2000-0"))
        await asyncio.sleep(0.2)
        with stops.watching(CONVERSATION, "1999-0", lambda r: True) as watch:
            assert watch.stop.is_set()
        with stops.watching(CONVERSATION, "2001-0", lambda r: True) as later:
            assert not later.stop.is_set()  # a later run is not stopped by an earlier request


async def test_a_malformed_publication_is_ignored(redis: aioredis.Redis) -> None:
    async with listening(redis) as (stops, _):
        with stops.watching(CONVERSATION, "1-0", lambda r: True) as watch:
            await redis.publish("parley:stops", b"{not json")
            await redis.publish("parley:stops", b'{"entry": "2-0"}')
            await Stops(redis, Keys("parley")).request(request("3-0"))
            assert await stopped(watch.stop)


@pytest.mark.process
async def test_the_listener_comes_back_after_redis_does_and_reads_what_it_missed(
    tmp_path: Path,
) -> None:
    async with private_redis(tmp_path) as server:
        client = server.client()
        other = server.client()
        try:
            async with listening(client) as (stops, health):
                with stops.watching(CONVERSATION, "10-0", lambda r: True) as watch:
                    await server.down()
                    await asyncio.sleep(0.5)
                    assert health.loops["stops"].state == "degraded"
                    await server.up()
                    # Recorded while this listener may not be subscribed again yet.
                    await Stops(other, Keys("parley")).request(request("11-0"))
                    assert await stopped(watch.stop, within=10)
                    for _ in range(100):
                        if health.loops["stops"].state == "ok":
                            break
                        await asyncio.sleep(0.05)
                    assert health.loops["stops"].state == "ok"
        finally:
            await client.aclose()
            await other.aclose()


async def test_a_lost_subscription_catches_up_from_the_recorded_request(
    redis: aioredis.Redis,
) -> None:
    async with listening(redis) as (stops, _):
        with stops.watching(CONVERSATION, "20-0", lambda r: True) as watch:
            # The request is recorded but its publication goes to nobody ...
            await redis.set(f"parley:conv:{{{CONVERSATION}}}:stop", RECORD.encode(request("21-0")))
            # ... and the listener's connection drops: it resubscribes and reads the record.
            await redis.client_kill_filter(_type="pubsub")
            assert await stopped(watch.stop)


@pytest.mark.process
async def test_a_stale_pooled_connection_does_not_make_the_listener_recovered_while_redis_is_away(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Connections idle in the pool when Redis stopped take SUBSCRIBE without complaint: one
    outage is still one "degraded" and one "recovered", and that only once Redis is back."""
    caplog.set_level(logging.INFO, logger="bot.ops.health")
    async with private_redis(tmp_path) as server:
        client = redis_client(server.url, settings())  # the service's own client
        pool = client.connection_pool
        held: list[object] = []
        try:
            async with listening(client) as (_, health):
                beat = health.loops["stops"]
                await asyncio.gather(*(client.ping() for _ in range(4)))  # idle in the pool
                await server.down()
                for _ in range(300):
                    # The process's other loops hold the connections Redis's stop broke; the
                    # pool's next one for the listener is one that sat idle (stale).
                    while idle(pool):
                        top = pool.get_available_connection()
                        if top.is_connected:
                            await pool.release(top)
                            break
                        held.append(top)
                    await asyncio.sleep(0.01)
                assert beat.state == "degraded"
                away = [r.getMessage() for r in caplog.records]
                assert not [line for line in away if "recovered" in line], away
                for connection in held:
                    await pool.release(connection)  # type: ignore[arg-type]
                held.clear()
                await server.up()
                for _ in range(200):
                    if beat.state == "ok":
                        break
                    await asyncio.sleep(0.05)
                assert beat.state == "ok"
        finally:
            for connection in held:
                await pool.release(connection)  # type: ignore[arg-type]
            await client.aclose()
    lines = [r.getMessage() for r in caplog.records]
    assert len([line for line in lines if line.startswith("stops degraded")]) == 1, lines
    assert len([line for line in lines if line.startswith("stops recovered")]) == 1, lines


def idle(pool: aioredis.ConnectionPool) -> int:
    return sum(
        count
        for count, labels in pool.get_connection_count()
        if labels["db.client.connection.state"] == "idle"
    )
