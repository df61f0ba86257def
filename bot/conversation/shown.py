"""The numbered /memories list each person last saw, so `/forget N` means what they read.

Numbers on a list are positions in a listing that changes: after a Forget, the memory that
was number 3 is number 2 in a fresh listing. The list as shown (page, message, and the ids
and texts behind each number) is kept per person and conversation; `/forget N` looks the
number up there, and a list whose entry is forgotten is shown again with fresh numbers. A
forgotten memory's text leaves the kept list with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import redis.asyncio as aioredis

from bot.runtime.codec import Codec
from bot.runtime.keys import Keys


@dataclass(frozen=True, kw_only=True)
class ShownList:
    page: int
    entries: dict[int, tuple[str, str]] = field(default_factory=dict)  # number → (id, text)
    message_id: str | None = None  # the message that shows it, once sent

    def keeping(self, memory_ids: set[str]) -> ShownList:
        kept = {n: entry for n, entry in self.entries.items() if entry[0] in memory_ids}
        return replace(self, entries=kept)


RECORD: Codec[ShownList] = Codec(ShownList)


class ShownLists:
    def __init__(self, redis: aioredis.Redis, keys: Keys, *, ttl: float) -> None:
        self.redis = redis
        self.keys = keys
        self.ttl_ms = int(ttl * 1000)

    async def get(self, conversation_id: str, user_id: str) -> ShownList | None:
        raw = await self.redis.get(self.keys.shown_list(conversation_id, user_id))
        if raw is None:
            return None
        return RECORD.decode(raw)

    async def save(self, conversation_id: str, user_id: str, shown: ShownList) -> None:
        key = self.keys.shown_list(conversation_id, user_id)
        await self.redis.set(key, RECORD.encode(shown), px=self.ttl_ms)

    async def clear(self, conversation_id: str, user_id: str) -> None:
        await self.redis.delete(self.keys.shown_list(conversation_id, user_id))
