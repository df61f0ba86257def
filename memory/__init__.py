"""Long-term memory on a RedisVL vector index."""

from __future__ import annotations

import redis.asyncio as aioredis

from memory.config import MemoryConfig, Tuning
from memory.e5 import multilingual_embedder
from memory.embedders import Embedder, EmbeddingModelError, local_embedder
from memory.remote_embedders import EmbeddingServiceError, ollama_embedder, openai_embedder
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
    "EmbeddingServiceError",
    "MemoryConfig",
    "MemoryIndexMismatch",
    "RedisMemoryStore",
    "Tuning",
    "local_embedder",
    "multilingual_embedder",
    "ollama_embedder",
    "open_store",
    "openai_embedder",
]
