"""Where a memory came from, and changing it in place: the memories recall gave a
conversation lately (so "why do you think that?" can list them), and corrections that keep
who said it, where and when.

The last RECALLS different sets of memories recall found are kept per chat for a week
(`memory:recalled:<platform>:<team>:<chat>`, newest first): a run recalls before each think
step, so the newest set is what the last answer there stood on (/why). Per chat, not per
thread: a Slack slash command comes from the channel, never from the thread its answer was
in, and every thread of a chat has the same audience (what each may read is checked again
by scope). Asking "why do you think that?" in
words starts a run whose own recall comes first, so the model's tool reads the earlier sets
too.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import redis.asyncio as aioredis

from agent.protocols import MemoryRecord, RunContext
from memory.index import FIELDS, record
from replies import as_text

USED_TTL = 7 * 86_400
RECALLS = 5
# The set moves to the front (an older copy of it goes), the list keeps RECALLS sets.
NOTE_USED = """
redis.call('LREM', KEYS[1], 0, ARGV[1])
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1
"""
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


def used_key(prefix: str, context: RunContext) -> str:
    return f"{prefix}:memory:recalled:{context.platform}:{context.team_id or '-'}:{context.chat_id}"


async def note_used(
    redis: aioredis.Redis, prefix: str, context: RunContext, records: list[MemoryRecord]
) -> None:
    if records:
        ids = ",".join(memory.id for memory in records)
        key = used_key(prefix, context)
        await redis.register_script(NOTE_USED)(keys=[key], args=[ids, RECALLS, USED_TTL])


async def used(store: Store, context: RunContext) -> list[MemoryRecord]:
    """The memories the chat's last recall found that this conversation may still see, in
    the order recall ranked them (forgotten ones left out)."""
    raw = await store.redis.lindex(used_key(store.prefix, context), 0)
    return await _visible(store, context, as_text(raw).split(",") if raw else [])


async def recalled(store: Store, context: RunContext) -> list[MemoryRecord]:
    """Every memory the chat's last RECALLS recalls found that this conversation may still
    see, newest recall first, each once."""
    sets = await store.redis.lrange(used_key(store.prefix, context), 0, -1)
    ids = [memory_id for raw in sets for memory_id in as_text(raw).split(",")]
    return await _visible(store, context, list(dict.fromkeys(ids)))


async def _visible(store: Store, context: RunContext, ids: list[str]) -> list[MemoryRecord]:
    """These memories, those still there in a scope this conversation may read. The scope is
    checked on every read: a conversation id names no audience by itself."""
    fields = [name for name in FIELDS if name != "id"]
    visible = set(context.readable_scopes())
    found = []
    for memory_id in ids:
        values = await store.redis.hmget(store._key(memory_id), fields)
        doc = {name: as_text(v) for name, v in zip(fields, values, strict=True) if v is not None}
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
