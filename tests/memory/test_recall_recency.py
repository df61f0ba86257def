"""The recency bonus: a memory used just now may be lifted past a slightly closer one."""

from __future__ import annotations

import re
import time
from typing import Any

import redis.asyncio as aioredis
from redisvl.query import VectorQuery

from memory import Embedder, MemoryConfig, RedisMemoryStore
from tests.memory.test_store import ANA_DM

FACTS = [
    "I water the office plants on Fridays",
    "My bike is a green gravel bike",
    "I am learning the cello",
    "Our team lunch is on Thursdays",
    "I prefer tea to coffee",
    "My flat is on the fourth floor",
    "I collect old maps",
]
QUESTION = "which day do I water the plants?"
LOOSE = {"max_distance": 2.0, "margin": 2.0, "k": 3}


async def store_with(
    redis: aioredis.Redis, embedder: Embedder, **config: Any
) -> tuple[RedisMemoryStore, list[tuple[int, int]]]:
    store = await RedisMemoryStore(redis, embedder, config=MemoryConfig(**config)).open()
    asked: list[tuple[int, int]] = []  # (k asked of the index, found), per nearest search
    batch_query = store.index.batch_query

    async def counted(queries: list[Any], *args: Any, **kwargs: Any) -> list[Any]:
        results = await batch_query(queries, *args, **kwargs)
        for query, found in zip(queries, results, strict=True):
            if isinstance(query, VectorQuery):
                knn = re.search(r"KNN (\d+)", str(query))
                assert knn is not None
                asked.append((int(knn.group(1)), len(found)))
        return results

    store.index.batch_query = counted  # type: ignore[method-assign]
    return store, asked


async def test_without_a_recency_bonus_the_index_is_asked_for_k_only(
    redis: aioredis.Redis, embedder: Embedder
) -> None:
    store, asked = await store_with(redis, embedder, recency_weight=0.0, **LOOSE)
    for fact in FACTS:
        await store.remember(fact, ANA_DM)
    asked.clear()
    found = await store.recall(QUESTION, ANA_DM)
    assert asked == [(3, 3)]
    assert found[0].text == FACTS[0]
    distances = [m.distance for m in found]
    assert distances == sorted(distances)


async def test_a_memory_used_just_now_is_lifted_from_beyond_the_top_k(
    redis: aioredis.Redis, embedder: Embedder
) -> None:
    store, asked = await store_with(redis, embedder, recency_weight=0.5, **LOOSE)
    records = [await store.remember(fact, ANA_DM) for fact in FACTS]
    by_distance = await store.nearest(
        await store.embedder.embed(QUESTION), [ANA_DM.write_scope("private")], len(FACTS)
    )
    fifth = by_distance[4]["id"]  # the key of one outside the top 3 by distance alone
    long_ago = time.time() - 90 * 86_400
    for record in records:
        used = time.time() if store._key(record.id) == fifth else long_ago
        await redis.hset(store._key(record.id), "last_used_at", used)
    asked.clear()
    found = await store.recall(QUESTION, ANA_DM)
    assert asked[0][0] == 6  # twice k, so a recently used memory can rise
    assert fifth in [store._key(m.id) for m in found]
