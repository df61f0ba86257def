"""The journal of approved tool calls in Redis: one hash per run, a field per call attempt.

A field is written once as "started" before the call runs (HSETNX, so of two processes only
the first runs it) and overwritten with the result when it ends. A replay of the run reads
the field instead of running the call again.
"""

from __future__ import annotations

import redis.asyncio as aioredis

from agent.protocols import JournalEntry, JournalUnavailable, RunContext
from bot.ops.health import REDIS_DOWN
from bot.runtime.codec import Codec
from bot.runtime.keys import Keys

RECORD: Codec[JournalEntry] = Codec(JournalEntry)
_STARTED = RECORD.encode(JournalEntry(finished=False))


class RedisToolJournal:
    def __init__(self, redis: aioredis.Redis, keys: Keys, *, ttl: float) -> None:
        self.redis = redis
        self.keys = keys
        self.ttl_ms = int(ttl * 1000)

    async def begin(self, context: RunContext, run_id: str, call: str) -> JournalEntry | None:
        key = self.keys.journal(context.conversation_id, run_id)
        try:
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.hsetnx(key, call, _STARTED)
                pipe.hget(key, call)
                pipe.pexpire(key, self.ttl_ms)
                created, raw, _ = await pipe.execute()
        except REDIS_DOWN as exc:  # the call did not start: the run stops, the entry is retried
            raise JournalUnavailable(f"could not journal {call}") from exc
        if created:
            return None
        return RECORD.decode(raw)

    async def finish(
        self, context: RunContext, run_id: str, call: str, entry: JournalEntry
    ) -> None:
        key = self.keys.journal(context.conversation_id, run_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, call, RECORD.encode(entry))
            pipe.pexpire(key, self.ttl_ms)
            await pipe.execute()
