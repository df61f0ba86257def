"""Long-term memory on a RedisVL vector index."""

from __future__ import annotations

import redis.asyncio as aioredis

from memory.config import MemoryConfig
from memory.embedders import Embedder, EmbeddingModelError, local_embedder, ollama_embedder
from memory.store import MemoryIndexMismatch, RedisMemoryStore


async def open_store(
    redis: aioredis.Redis,
    embedder: Embedder,
    *,
    prefix: str = "parley",
    config: MemoryConfig = MemoryConfig(),
) -> RedisMemoryStore:
    """A ready store: the index exists and matches the embedder."""
    return await RedisMemoryStore(redis, embedder, prefix=prefix, config=config).open()


__all__ = [
    "Embedder",
    "EmbeddingModelError",
    "MemoryConfig",
    "MemoryIndexMismatch",
    "RedisMemoryStore",
    "local_embedder",
    "ollama_embedder",
    "open_store",
]
