"""Where a memory came from, and changing it in place: the memories recall last gave a
conversation (so "why do you think that?" can list them), and corrections that keep who
said it, where and when.

The last recall's memories are kept per conversation for a week (`memory:used:<conv>`),
overwritten by every recall that found something: a run recalls before each think step,
so what the last one found is what its answer stood on.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import redis.asyncio as aioredis

from agent.protocols import MemoryRecord, RunContext
from memory.counts import decode
from memory.index import FIELDS, record

USED_TTL = 7 * 86_400
SET_IF_THERE = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
"""


class Store(Protocol):
    """What provenance needs of the store (memory.store.RedisMemoryStore)."""

    redis: aioredis.Redis
    prefix: str

    def _key(self, memory_id: str) -> str: ...

    async def removable(self, context: RunContext, memory_id: str) -> MemoryRecord | None: ...

    async def embed_memory(self, text: str) -> dict[str, Any]: ...

    async def noted(self, key: str) -> None: ...


def used_key(prefix: str, conversation_id: str) -> str:
    return f"{prefix}:memory:used:{conversation_id}"


async def note_used(
    redis: aioredis.Redis, prefix: str, conversation_id: str, records: list[MemoryRecord]
) -> None:
    if records:
        ids = ",".join(memory.id for memory in records)
        await redis.set(used_key(prefix, conversation_id), ids, ex=USED_TTL)


async def used(store: Store, context: RunContext) -> list[MemoryRecord]:
    """The memories the conversation's last recall found that it may still see, in the
    order recall ranked them (forgotten ones left out)."""
    raw = await store.redis.get(used_key(store.prefix, context.conversation_id))
    if not raw:
        return []
    fields = [name for name in FIELDS if name != "id"]
    visible = set(context.readable_scopes())
    found = []
    for memory_id in decode(raw).split(","):
        values = await store.redis.hmget(store._key(memory_id), fields)
        doc = {name: decode(v) for name, v in zip(fields, values, strict=True) if v is not None}
        if doc.get("scope") in visible:
            found.append(record({**doc, "id": memory_id}))
    return found


async def correct(
    store: Store, context: RunContext, memory_id: str, text: str
) -> MemoryRecord | None:
    """New words for a memory this user may forget here; who said it, where and when stay.
    Its vector follows the words (a move in progress is told, like any write)."""
    text = text.strip()
    existing = await store.removable(context, memory_id)
    if existing is None or not text:
        return None
    key = store._key(memory_id)
    now = time.time()
    mapping = {"text": text, "corrected_at": now, **(await store.embed_memory(text))}
    fields = [item for pair in mapping.items() for item in pair]
    # only while it still exists: a correction racing a Forget must not bring it back
    if not await store.redis.register_script(SET_IF_THERE)(keys=[key], args=fields):
        return None
    await store.noted(key)
    return MemoryRecord(
        **{
            **{name: getattr(existing, name) for name in existing.__dataclass_fields__},
            "text": text,
            "corrected_at": now,
        }
    )
