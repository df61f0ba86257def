"""How many memories each scope holds, kept in one hash beside the memories.

Counting a 100k-memory scope through the index costs ~30 ms, and recall needs the count
before every search, so the count is kept. It changes only inside Lua scripts that also
write or delete the memory: a full scope's check, write and count happen in one step, so
writers racing at its edge cannot overshoot it, and two deletions of one memory count once.
RedisVL has no such compare-and-write, hence raw commands here.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from replies import as_text
from replies import as_text as decode  # noqa: F401  (memory/store.py imports it by this name)

FULL, STORED, REPLACED = 0, 1, 2

# KEYS: the new memory, the counts hash, a memory it may replace (used when ARGV[3] is 1);
# ARGV: scope, limit, 0 or 1, then the new memory's field/value pairs.
INSERT_IF_ROOM = """
local count = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
local replaced = 0
if count >= tonumber(ARGV[2]) then
  if ARGV[3] ~= '1' or redis.call('DEL', KEYS[3]) == 0 then
    return 0
  end
  redis.call('HINCRBY', KEYS[2], ARGV[1], -1)
  replaced = 1
end
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
return 1 + replaced
"""

# KEYS: the counts hash, then the memories to delete. Returns how many were there.
DELETE_COUNTED = """
local deleted = 0
for i = 2, #KEYS do
  local scope = redis.call('HGET', KEYS[i], 'scope')
  if scope and redis.call('DEL', KEYS[i]) == 1 then
    redis.call('HINCRBY', KEYS[1], scope, -1)
    deleted = deleted + 1
  end
end
return deleted
"""

BATCH = 1000


class ScopeCounts:
    def __init__(self, redis: aioredis.Redis, prefix: str) -> None:
        self.redis = redis
        self.key = f"{prefix}:memory:counts"
        self.docs = f"{prefix}:memory:doc:*"
        self._insert = redis.register_script(INSERT_IF_ROOM)
        self._delete = redis.register_script(DELETE_COUNTED)

    async def count(self, scopes: list[str]) -> int:
        """How many memories these scopes hold."""
        values = await self.redis.hmget(self.key, scopes)
        return sum(max(0, int(value)) for value in values if value is not None)

    async def insert(
        self, key: str, scope: str, limit: int, mapping: dict[Any, Any], replacing: str | None
    ) -> int:
        """Write a new memory if its scope holds fewer than `limit`, else in place of
        `replacing` if that still exists: FULL, STORED or REPLACED."""
        fields = [item for pair in mapping.items() for item in pair]
        return int(
            await self._insert(
                keys=[key, self.key, replacing or key],
                args=[scope, limit, int(replacing is not None), *fields],
            )
        )

    async def delete(self, keys: list[str]) -> int:
        """Delete memories and take them off their scopes' counts; how many were there."""
        deleted = 0
        for start in range(0, len(keys), BATCH):
            deleted += int(await self._delete(keys=[self.key, *keys[start : start + BATCH]]))
        return deleted

    async def recount(self) -> None:
        """Rebuild the counts from the documents themselves. They are scanned, not queried:
        this runs while the index is rebuilt and may not cover every memory yet."""
        counts: dict[str, int] = {}
        keys = [key async for key in self.redis.scan_iter(match=self.docs, count=BATCH)]
        for start in range(0, len(keys), BATCH):
            async with self.redis.pipeline(transaction=False) as pipe:
                for key in keys[start : start + BATCH]:
                    pipe.hget(key, "scope")
                for scope in await pipe.execute():
                    if scope is not None:
                        counts[as_text(scope)] = counts.get(as_text(scope), 0) + 1
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(self.key)
            if counts:
                pipe.hset(self.key, mapping=counts)  # type: ignore[arg-type]
            await pipe.execute()
