"""The consumer group's housekeeping: entries and consumers that dead workers left behind.

Entries another consumer left idle for `reclaim_idle` seconds are claimed (XAUTOCLAIM) and
handed to this worker. Consumers with nothing pending that have not read for a long time
are removed from the group; a worker that stops cleanly with nothing pending leaves it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import redis.asyncio as aioredis
from redis.commands.core import AsyncScript
from redis.exceptions import ResponseError

from bot.ops import metrics
from bot.ops.health import REDIS_DOWN
from bot.runtime.codec import as_text
from bot.runtime.keys import Keys
from loops import Heartbeat, pause, repeat

log = logging.getLogger(__name__)

GROUP = "workers"
FORGET_AFTER = 10  # reclaim intervals a consumer with nothing pending may idle before removal
Accept = Callable[[Sequence[tuple[Any, Any]]], Awaitable[None]]

# Remove a consumer from the group, but only while it has nothing pending (DELCONSUMER would
# drop its pending entries, and nobody would handle them).
_LEAVE = """
if #redis.call('xpending', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2]) > 0 then
  return 0
end
redis.call('xgroup', 'delconsumer', KEYS[1], ARGV[1], ARGV[2])
return 1
"""


async def ensure_group(redis: aioredis.Redis, keys: Keys) -> None:
    """Create the consumer group (and the stream) unless it exists."""
    try:
        await redis.xgroup_create(keys.inbox, GROUP, id="0", mkstream=True)
    except ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


def group_gone(exc: ResponseError) -> bool:
    """The consumer group (or the whole stream) is missing: Redis came back without its data."""
    text = str(exc)
    return "NOGROUP" in text or "no such key" in text


@dataclass(eq=False)
class Reclaimer:
    redis: aioredis.Redis
    keys: Keys
    name: str
    accept: Accept
    heartbeat: Heartbeat
    _: KW_ONLY
    reclaim_idle: float
    forget_idle: float = field(init=False)
    _leave: AsyncScript = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.forget_idle = FORGET_AFTER * self.reclaim_idle
        self._leave = self.redis.register_script(_LEAVE)

    async def run(self, stopping: asyncio.Event) -> None:
        interval = max(0.05, self.reclaim_idle / 2)
        self.heartbeat.backoff.cap = min(self.heartbeat.backoff.cap, interval)
        await pause(stopping, interval)  # nothing is idle long enough yet
        await repeat(stopping, self.heartbeat, self._one_pass, interval)

    async def _one_pass(self) -> None:
        try:
            await self.reclaim()
            await self.forget_departed()
            await self._sample_queue()
        except ResponseError as exc:
            if not group_gone(exc):
                raise
            # Redis lost its data: the reading loop creates the group again, and says so

    async def reclaim(self) -> int:
        """Take over entries that another (dead or stuck) consumer left idle."""
        start = "0-0"
        claimed = 0
        for _ in range(1000):  # pages of 100: the rest waits for the next pass
            result = await self.redis.xautoclaim(
                self.keys.inbox,
                GROUP,
                self.name,
                min_idle_time=int(self.reclaim_idle * 1000),
                start_id=start,
                count=100,
            )
            start, entries = result[0], result[1]
            if entries:
                await self.accept(entries)
                claimed += len(entries)
            if start in (b"0-0", "0-0"):
                break
        if claimed:
            log.info("reclaimed %d idle inbox entries", claimed)
        return claimed

    async def _sample_queue(self) -> None:
        for group in await self.redis.xinfo_groups(self.keys.inbox):
            if group.get("name") in (GROUP, GROUP.encode()):
                lag = group.get("lag")
                metrics.QUEUE_LENGTH.set(float(lag or 0))

    async def forget_departed(self) -> int:
        """Remove consumers with nothing pending that have not read for a long time."""
        removed = 0
        consumers: list[dict[Any, Any]] = await self.redis.xinfo_consumers(self.keys.inbox, GROUP)
        for consumer in consumers:
            name = as_text(consumer["name"])
            idle = int(consumer.get("idle") or 0) / 1000
            if name == self.name or consumer.get("pending") or idle < self.forget_idle:
                continue
            if await self._leave(keys=[self.keys.inbox], args=[GROUP, name]):
                removed += 1
                log.info("removed consumer %s, idle for %.0f s, from the group", name, idle)
            if removed >= 100:
                break
        return removed

    async def leave(self) -> None:
        """On a clean stop: leave the group unless entries are still pending for this worker."""
        try:
            if await self._leave(keys=[self.keys.inbox], args=[GROUP, self.name]):
                log.info("worker %s left the consumer group", self.name)
            else:
                log.info("worker %s leaves pending entries for the others to claim", self.name)
        except REDIS_DOWN:
            log.warning("worker %s could not leave the consumer group: Redis is away", self.name)
        except ResponseError as exc:
            # Stopped before its first read made the group (or Redis came back empty): there is
            # no membership to give up, and a clean stop must still exit 0.
            if not group_gone(exc):
                raise
            log.info("worker %s stopped before joining the consumer group", self.name)
