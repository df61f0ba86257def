"""Scope caps hold exactly under concurrent writers, on the real Redis."""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis

from agent.protocols import MemoryFull, MemoryRecord, Origin
from memory import Embedder, MemoryConfig, RedisMemoryStore, open_store
from tests.memory.test_store import ANA_DM

LIMIT = 5
TEXTS = [
    f"Ana's {thing} is {colour}"
    for thing in ("bicycle", "umbrella", "kettle", "sofa", "scarf", "mug")
    for colour in ("red", "green", "blue")
]  # 18 facts, none a near-duplicate of another at merge distance 0


async def stored(redis: aioredis.Redis, store: RedisMemoryStore) -> tuple[int, int]:
    """(the scope's count in the counts hash, the memory documents it really holds)."""
    count = int(await redis.hget("parley:memory:counts", ANA_DM.user_scope) or 0)
    docs = 0
    async for key in redis.scan_iter(match="parley:memory:doc:*"):
        docs += await redis.hget(key, "scope") == ANA_DM.user_scope.encode()
    return count, docs


async def race(
    store: RedisMemoryStore, texts: list[str], origin: Origin
) -> list[MemoryRecord | BaseException]:
    # Embeddings come from the cache and every writer has a connection ready, so they all
    # reach the cap check at once.
    for text in texts:
        await store.embedder.embed(text)
    await asyncio.gather(*(store.redis.ping() for _ in texts))
    return await asyncio.gather(
        *(store.remember(text, ANA_DM, origin=origin) for text in texts), return_exceptions=True
    )


async def test_concurrent_remembers_at_the_edge_keep_the_cap_exactly(
    redis: aioredis.Redis, embedder: Embedder
) -> None:
    config = MemoryConfig(max_per_user=LIMIT, merge_distance=0.0)
    store = await open_store(redis, embedder, config=config)
    for text in TEXTS[: LIMIT - 1]:
        await store.remember(text, ANA_DM)
    results = await race(store, TEXTS[LIMIT - 1 :], "remembered")
    kept = [r for r in results if isinstance(r, MemoryRecord)]
    refused = [r for r in results if isinstance(r, MemoryFull)]
    assert len(kept) == 1 and len(refused) == len(results) - 1, results
    assert await stored(redis, store) == (LIMIT, LIMIT)
    assert (await store.list_memories(ANA_DM)).total == LIMIT


async def test_concurrent_remembers_into_an_empty_scope_fill_it_and_no_more(
    redis: aioredis.Redis, embedder: Embedder
) -> None:
    config = MemoryConfig(max_per_user=LIMIT, merge_distance=0.0)
    store = await open_store(redis, embedder, config=config)
    results = await race(store, TEXTS, "remembered")
    assert sum(isinstance(r, MemoryRecord) for r in results) == LIMIT
    assert sum(isinstance(r, MemoryFull) for r in results) == len(TEXTS) - LIMIT
    assert await stored(redis, store) == (LIMIT, LIMIT)


async def test_concurrent_extractions_in_a_full_scope_only_swap_their_own_picks(
    redis: aioredis.Redis, embedder: Embedder
) -> None:
    config = MemoryConfig(max_per_user=LIMIT, merge_distance=0.0)
    store = await open_store(redis, embedder, config=config)
    remembered = TEXTS[:2]
    for text in remembered:
        await store.remember(text, ANA_DM)
    for text in TEXTS[2:LIMIT]:
        await store.remember(text, ANA_DM, origin="extracted")
    results = await race(store, TEXTS[LIMIT : LIMIT + 8], "extracted")
    assert all(isinstance(r, MemoryRecord | MemoryFull) for r in results), results
    assert any(isinstance(r, MemoryRecord) for r in results)
    assert await stored(redis, store) == (LIMIT, LIMIT)
    texts = {m.text for m in (await store.list_memories(ANA_DM)).records}
    assert set(remembered) <= texts  # never evicted to make room
