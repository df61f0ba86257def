"""Long-term memory on a RedisVL vector index."""

from __future__ import annotations

import redis.asyncio as aioredis

from memory.embedders import Embedder, local_embedder, ollama_embedder
from memory.store import MemoryIndexMismatch, RedisMemoryStore


async def open_store(
    redis: aioredis.Redis,
    embedder: Embedder,
    *,
    prefix: str = "parley",
    k: int = 5,
    max_distance: float = 0.75,
    merge_distance: float = 0.1,
    max_per_scope: int = 1000,
) -> RedisMemoryStore:
    """A ready store: the index exists and matches the embedder."""
    store = RedisMemoryStore(
        redis,
        embedder,
        prefix=prefix,
        k=k,
        max_distance=max_distance,
        merge_distance=merge_distance,
        max_per_scope=max_per_scope,
    )
    return await store.open()


__all__ = [
    "Embedder",
    "MemoryIndexMismatch",
    "RedisMemoryStore",
    "local_embedder",
    "ollama_embedder",
    "open_store",
]
