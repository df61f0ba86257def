"""Opens the long-term memory store configured in settings (None when it cannot start)."""

from __future__ import annotations

import logging

import redis.asyncio as aioredis

from agent.protocols import MemoryStore
from bot.config import Settings

log = logging.getLogger(__name__)


async def open_memory(settings: Settings, redis: aioredis.Redis) -> MemoryStore | None:
    try:
        import memory
    except ImportError:
        return None
    opener = getattr(memory, "open_store", None)
    if opener is None:
        return None
    store: MemoryStore = await opener(settings, redis)
    return store
