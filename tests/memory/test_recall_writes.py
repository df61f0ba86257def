"""Recall's Redis traffic: a non-empty scope is counted once in a while, not before every
search, and last-used times are written together, never bringing back a forgotten memory."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError

from memory import Embedder, RedisMemoryStore, open_store
from tests.memory.test_store import ANA_DM, ANA_DM_LATER
from tests.private_redis import private_redis


async def calls(redis: aioredis.Redis, command: str) -> int:
    stats = await redis.info("commandstats")
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))


async def test_a_non_empty_scope_is_counted_once_for_several_recalls(
    redis: aioredis.Redis, store: RedisMemoryStore
) -> None:
    await store.remember("I'm allergic to peanuts", ANA_DM)
    before = await calls(redis, "hmget")
    for question in ("what can't I eat?", "any food allergies?", "should I avoid nuts?"):
        found = await store.recall(question, ANA_DM_LATER)
        assert [m.text for m in found] == ["I'm allergic to peanuts"]
    assert await calls(redis, "hmget") - before == 1


async def test_last_used_times_are_written_together_and_only_for_memories_that_exist(
    redis: aioredis.Redis, store: RedisMemoryStore
) -> None:
    peanuts = await store.remember("I'm allergic to peanuts", ANA_DM)
    porto = await store.remember("My sister lives in Porto", ANA_DM)
    key = f"parley:memory:doc:{peanuts.id}"
    [first] = await store.recall("which foods should I stay away from?", ANA_DM_LATER)
    written = float(await redis.hget(key, "last_used_at") or 0)
    assert first.id == peanuts.id and written > peanuts.last_used_at  # the first is written

    await store.recall("anything about peanuts?", ANA_DM_LATER)
    await store.recall("where does my sister live?", ANA_DM_LATER)
    assert float(await redis.hget(key, "last_used_at") or 0) == written  # noted, not yet written
    assert await store.forget(ANA_DM, porto.id)
    await store.write_used()
    assert float(await redis.hget(key, "last_used_at") or 0) > written
    assert not await redis.exists(f"parley:memory:doc:{porto.id}")  # not brought back


async def test_last_used_times_noted_while_redis_is_away_are_written_once_it_is_back(
    tmp_path: Path, embedder: Embedder
) -> None:
    async with private_redis(tmp_path / "redis") as server:
        client = aioredis.Redis.from_url(server.url)
        try:
            store = await open_store(client, embedder)
            peanuts = await store.remember("I'm allergic to peanuts", ANA_DM)
            key = f"parley:memory:doc:{peanuts.id}"
            await store.recall("which foods should I stay away from?", ANA_DM_LATER)
            written = float(await client.hget(key, "last_used_at") or 0)
            await store.recall("anything about peanuts?", ANA_DM_LATER)  # noted, not written
            await server.down()
            with pytest.raises(RedisConnectionError):
                await store.write_used()
            await server.up()
            await store.write_used()  # what the failed write held is kept for this one
            assert float(await client.hget(key, "last_used_at") or 0) > written
        finally:
            await client.aclose()
