"""Opens the long-term memory store configured in settings."""

from __future__ import annotations

import asyncio
import logging

import redis.asyncio as aioredis

from bot.config import Settings
from memory import Embedder, RedisMemoryStore, local_embedder, ollama_embedder, open_store

log = logging.getLogger(__name__)


async def build_embedder(settings: Settings) -> Embedder:
    if settings.memory.embedder == "ollama":
        return await ollama_embedder(settings.ollama.host, settings.ollama.embed_model)
    return await asyncio.to_thread(local_embedder)


async def open_memory(
    settings: Settings, redis: aioredis.Redis, embedder: Embedder | None = None
) -> RedisMemoryStore:
    memory = settings.memory
    return await open_store(
        redis,
        embedder or await build_embedder(settings),
        prefix=settings.redis.key_prefix,
        k=memory.recall_k,
        max_distance=memory.recall_max_distance,
        merge_distance=memory.merge_distance,
        max_per_scope=memory.max_per_scope,
    )


async def reindex(settings: Settings, redis: aioredis.Redis) -> int:
    store = RedisMemoryStore(
        redis,
        await build_embedder(settings),
        prefix=settings.redis.key_prefix,
    )
    return await store.reindex()
