"""Recall's Redis traffic: a non-empty scope is counted once in a while, not before every
search, and last-used times are written together, only once they are an hour old, in
bounded batches, never bringing back a forgotten memory."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError

from memory import Embedder, RedisMemoryStore, open_store, recall_cache
from memory.recall_cache import USED_BATCH, USED_STEP, RecallCache
from tests.memory.test_store import ANA_DM, ANA_DM_LATER
from tests.private_redis import private_redis


async def calls(redis: aioredis.Redis, command: str) -> int:
    """How many `command`s Redis carried out. Failed ones are left out: a script's first
    EVALSHA on a server that has not loaded it fails (NOSCRIPT) and is sent again."""
    stats = await redis.info("commandstats")
    stat = stats.get(f"cmdstat_{command}", {})
    return int(stat.get("calls", 0)) - int(stat.get("failed_calls", 0))


async def test_a_non_empty_scope_is_counted_once_for_several_recalls(
    redis: aioredis.Redis, store: RedisMemoryStore
) -> None:
    await store.remember("I'm allergic to peanuts", ANA_DM)
    before = await calls(redis, "hmget")
    for question in ("what can't I eat?", "any food allergies?", "should I avoid nuts?"):
        found = await store.recall(question, ANA_DM_LATER)
        assert [m.text for m in found] == ["I'm allergic to peanuts"]
    assert await calls(redis, "hmget") - before == 1


async def used_at(redis: aioredis.Redis, key: str) -> float:
    return float(await redis.hget(key, "last_used_at") or 0)


async def age(redis: aioredis.Redis, *keys: str) -> float:
    """Make these memories' last use older than the step; returns the time written."""
    then = time.time() - 2 * USED_STEP
    for key in keys:
        await redis.hset(key, "last_used_at", then)
    return then


async def test_last_used_times_are_written_once_an_hour_old_and_only_for_memories_that_exist(
    redis: aioredis.Redis, store: RedisMemoryStore
) -> None:
    peanuts = await store.remember("I'm allergic to peanuts", ANA_DM)
    porto = await store.remember("My sister lives in Porto", ANA_DM)
    peanuts_key, porto_key = store._key(peanuts.id), store._key(porto.id)
    old = await age(redis, peanuts_key, porto_key)
    [first] = await store.recall("which foods should I stay away from?", ANA_DM_LATER)
    written = await used_at(redis, peanuts_key)
    assert first.id == peanuts.id and written > old + USED_STEP  # the first is written

    await store.recall("anything about peanuts?", ANA_DM_LATER)  # used just now: not noted
    await store.recall("where does my sister live?", ANA_DM_LATER)
    assert await used_at(redis, porto_key) == pytest.approx(old)  # noted, not yet written
    assert await store.forget(ANA_DM, porto.id)
    await store.write_used()
    assert await used_at(redis, peanuts_key) == written
    assert not await redis.exists(porto_key)  # not brought back


async def test_a_memory_used_within_the_hour_is_not_indexed_again(
    redis: aioredis.Redis, store: RedisMemoryStore
) -> None:
    """Writing a field re-indexes the whole document, vector included, while Redis waits."""
    await store.remember("I'm allergic to peanuts", ANA_DM)
    await store.recall("which foods should I stay away from?", ANA_DM_LATER)
    before = await calls(redis, "hset")
    for question in ("any food allergies?", "should I avoid nuts?", "what can't I eat?"):
        assert await store.recall(question, ANA_DM_LATER)
    await store.write_used()
    assert await calls(redis, "hset") == before


async def test_last_used_times_go_in_batches_of_bounded_size(
    redis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backlog is written a batch per round trip, each holding Redis for ~10 ms at most."""
    monkeypatch.setattr(recall_cache, "USED_EVERY", 3600.0)  # only a full batch is due

    async def count(scopes: list[str]) -> int:
        return 1

    cache = RecallCache(redis, count)
    keys = [f"parley:memory:doc:batch{n}" for n in range(2 * USED_BATCH + 6)]
    for key in keys:
        await redis.hset(key, "last_used_at", 1.0)
    before = await calls(redis, "evalsha")
    await cache.used(dict.fromkeys(keys, 1.0))  # the first write is due
    await cache.used({})  # a whole batch still waits: written at once
    await cache.used({})  # six wait, and a second has not passed
    assert await calls(redis, "evalsha") - before == 2
    written = [await used_at(redis, key) for key in keys]
    assert all(w > 1.0 for w in written[: 2 * USED_BATCH])
    assert all(w == 1.0 for w in written[2 * USED_BATCH :])  # the longest waiting went first
    await cache.write_used()
    assert await calls(redis, "evalsha") - before == 3
    assert all([await used_at(redis, key) > 1.0 for key in keys])


@pytest.mark.network
async def test_last_used_times_noted_while_redis_is_away_are_written_once_it_is_back(
    tmp_path: Path, embedder: Embedder
) -> None:
    async with private_redis(tmp_path / "redis") as server:
        client = server.client()
        try:
            store = await open_store(client, embedder)
            peanuts = await store.remember("I'm allergic to peanuts", ANA_DM)
            key = store._key(peanuts.id)
            await age(client, key)
            await store.recall("which foods should I stay away from?", ANA_DM_LATER)  # written
            old = await age(client, key)
            await store.recall("anything about peanuts?", ANA_DM_LATER)  # noted, not written
            await server.down()
            with pytest.raises(RedisConnectionError):
                await store.write_used()
            await server.up()
            await store.write_used()  # what the failed write held is kept for this one
            assert await used_at(client, key) > old + USED_STEP
        finally:
            await client.aclose()


@pytest.mark.network
async def test_a_recall_while_redis_is_away_fails_and_the_next_once_it_is_back_finds_all(
    tmp_path: Path, embedder: Embedder
) -> None:
    """The instructions and the nearest memories are one pipelined round trip: with Redis
    away it fails as one error (the run thinks without memory), and once Redis is back the
    next recall finds both again on the same client."""
    async with private_redis(tmp_path / "redis") as server:
        client = server.client()
        try:
            store = await open_store(client, embedder)
            await store.remember("answer in Spanish", ANA_DM, kind="instruction")
            await store.remember("I'm allergic to peanuts", ANA_DM)
            question = "which foods should I stay away from?"
            found = [m.text for m in await store.recall(question, ANA_DM_LATER)]
            assert found == ["answer in Spanish", "I'm allergic to peanuts"]
            await server.down()
            with pytest.raises(RedisConnectionError):
                await store.recall("anything about peanuts?", ANA_DM_LATER)
            await server.up()
            assert [m.text for m in await store.recall(question, ANA_DM_LATER)] == found
        finally:
            await client.aclose()
