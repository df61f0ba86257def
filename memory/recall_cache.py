"""What recall keeps between calls so that a think step costs fewer Redis round trips.

A scope found non-empty is trusted so for `SIZE_KEPT` seconds (the count then only picks the
query plan, and counting a 100k-memory scope through the index costs ~30 ms). Last-used
times are noted and written together, only to memories that still exist, so a forgotten
memory never comes back.

Writing one field of a memory makes RediSearch index the whole document again, its vector
included: about 0.3 ms of Redis, which every other client waits out. Written on every use,
recall's touches held Redis for 40–50 ms once a second at 65 objectives/s. So a memory's
time is written only once it is `USED_STEP` old (recency counts in days), and at most
`USED_BATCH` memories go in one round trip.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Awaitable, Callable

import redis.asyncio as aioredis

SIZE_KEPT = 10.0  # seconds a non-empty scope's size is trusted
SIZES_KEPT = 10_000  # scope sets whose size is remembered
USED_EVERY = 1.0  # seconds between two writes of recall's last-used times
USED_STEP = 3600.0  # a last-used time this recent is not written again
USED_BATCH = 32  # last-used times written in one round trip (about 10 ms of Redis)

# Last-used times for memories that still exist (a forgotten one must not come back).
_TOUCH = """
for i = 1, #KEYS do
  if redis.call('exists', KEYS[i]) == 1 then
    redis.call('hset', KEYS[i], 'last_used_at', ARGV[i])
  end
end
return 0
"""


class RecallCache:
    def __init__(self, redis: aioredis.Redis, count: Callable[[list[str]], Awaitable[int]]) -> None:
        self.redis = redis
        self.count = count
        self._sizes: dict[tuple[str, ...], tuple[float, int]] = {}  # → (trusted until, size)
        self._used: dict[str, float] = {}  # memory key → last used, not yet written
        self._used_written = -math.inf
        self._touch = redis.register_script(_TOUCH)

    async def size(self, scopes: list[str]) -> int:
        """How many memories the scopes hold: counted, or a recent non-zero count."""
        key, now = tuple(scopes), time.monotonic()
        trusted_until, size = self._sizes.get(key, (0.0, 0))
        if now < trusted_until:
            return size
        size = await self.count(scopes)
        self._sizes.pop(key, None)
        if size:
            self._sizes[key] = (now + SIZE_KEPT, size)
            while len(self._sizes) > SIZES_KEPT:
                del self._sizes[next(iter(self._sizes))]
        return size

    async def used(self, last_used: dict[str, float]) -> None:
        """Note that recall chose these memories (key → the last-used time stored now), and
        write a batch of notes if a second has passed or a whole batch waits."""
        now = time.time()
        self._used.update((key, now) for key, then in last_used.items() if now - then >= USED_STEP)
        due = time.monotonic() - self._used_written >= USED_EVERY
        if self._used and (due or len(self._used) >= USED_BATCH):
            await self._write()

    async def write_used(self) -> None:
        """Write every last-used time noted so far (at stop), a batch per round trip."""
        while self._used:
            await self._write()

    async def _write(self) -> None:
        self._used_written = time.monotonic()
        used = dict(itertools.islice(self._used.items(), USED_BATCH))  # the longest waiting
        for key in used:
            del self._used[key]
        try:
            await self._touch(keys=list(used), args=list(used.values()))
        except BaseException:
            for key, when in used.items():  # kept for the next write
                self._used.setdefault(key, when)
            raise
