"""Opens the long-term memory store configured in settings."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import redis.asyncio as aioredis

from agent.llm.base import ChatModel, LLMError
from agent.messages import ChatRequest, Message
from bot.config import Settings
from memory import (
    Embedder,
    MemoryConfig,
    RedisMemoryStore,
    Tuning,
    local_embedder,
    multilingual_embedder,
    ollama_embedder,
    open_store,
    openai_embedder,
)
from memory.extract import Completion
from memory.model_build import build, missing

log = logging.getLogger(__name__)


async def build_embedder(settings: Settings) -> Embedder:
    """The embedder PARLEY_EMBEDDER names; a remote one answers a first call here."""
    memory = settings.memory
    if memory.embedder == "ollama":
        return await ollama_embedder(
            settings.ollama.host, settings.ollama.embed_model, call_timeout=memory.embed_timeout
        )
    if memory.embedder == "openai":
        key = memory.embed_api_key
        return await openai_embedder(
            memory.embed_url or "",
            memory.embed_model or "",
            key.get_secret_value() if key else None,
            call_timeout=memory.embed_timeout,
        )
    if memory.embedder == "multilingual":
        return await asyncio.to_thread(multilingual_embedder)
    return await asyncio.to_thread(_local_embedder)


def _local_embedder() -> Embedder:
    """The local model, built on first use when nothing built it before (`parley setup`)."""
    if reason := missing():
        log.info("%s; building it now (once, a few seconds)", reason)
        build()
    return local_embedder()


def completion(model: ChatModel) -> Completion:
    """The chat model as end-of-run extraction asks it: one prompt, text back, None when
    every provider failed."""

    async def complete(system: str, prompt: str, max_tokens: int) -> str | None:
        request = ChatRequest(system=system, messages=[Message.user(prompt)], max_tokens=max_tokens)
        try:
            return (await model.complete(request)).message.text
        except LLMError:
            return None

    return complete


def memory_config(settings: Settings, tuning: Tuning) -> MemoryConfig:
    """The embedder's own distances (`tuning`), with what the operator set instead."""
    memory = settings.memory
    distances = {
        "max_distance": memory.recall_max_distance,
        "margin": memory.recall_margin,
        "generic_distance": memory.recall_generic_distance,
        "merge_distance": memory.merge_distance,
    }
    return MemoryConfig.tuned(
        tuning,
        **{name: value for name, value in distances.items() if value is not None},
        k=memory.recall_k,
        recency_weight=memory.recall_recency_weight,
        max_per_user=memory.max_per_user,
        max_per_chat=memory.max_per_chat,
        max_per_team=memory.max_per_team,
        algorithm=memory.index,
        hybrid_policy=memory.hybrid_policy,
    )


async def open_memory(
    settings: Settings, redis: aioredis.Redis, embedder: Embedder | None = None
) -> RedisMemoryStore:
    embedder = embedder or await build_embedder(settings)
    return await open_store(
        redis,
        embedder,
        prefix=settings.redis.key_prefix,
        config=memory_config(settings, embedder.tuning),
    )


async def reindex(
    settings: Settings,
    redis: aioredis.Redis,
    *,
    batch: int = 64,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Move every memory to the configured embedder (memory/moving.py)."""
    embedder = await build_embedder(settings)
    store = RedisMemoryStore(
        redis,
        embedder,
        prefix=settings.redis.key_prefix,
        config=memory_config(settings, embedder.tuning),
    )
    try:
        return await store.reindex(batch, progress)
    finally:
        await embedder.close()
