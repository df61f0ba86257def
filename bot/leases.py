"""A named lease in Redis: exactly one replica holds it at a time, and it moves on if that
replica dies. Telegram polling runs only while this process holds its lease."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable

import redis.asyncio as aioredis

log = logging.getLogger(__name__)

_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


class Lease:
    def __init__(self, redis: aioredis.Redis, key: str, *, ttl: float = 15.0) -> None:
        self.redis = redis
        self.key = key
        self.ttl_ms = int(ttl * 1000)
        self.owner = uuid.uuid4().hex
        self.held = False
        self._renew = redis.register_script(_RENEW)
        self._release = redis.register_script(_RELEASE)

    async def hold_while(
        self,
        stop: asyncio.Event,
        on_acquired: Callable[[], Awaitable[None]],
        on_lost: Callable[[], Awaitable[None]],
    ) -> None:
        """Try for the lease until `stop`; run the callbacks as it is won and lost."""
        interval = self.ttl_ms / 3000
        try:
            while not stop.is_set():
                if self.held:
                    if not await self._renew(keys=[self.key], args=[self.owner, self.ttl_ms]):
                        self.held = False
                        log.warning("lost the lease %s", self.key)
                        await on_lost()
                elif await self.redis.set(self.key, self.owner, nx=True, px=self.ttl_ms):
                    self.held = True
                    log.info("holding the lease %s", self.key)
                    await on_acquired()
                try:
                    async with asyncio.timeout(interval):
                        await stop.wait()
                except TimeoutError:
                    pass
        finally:
            if self.held:
                self.held = False
                await on_lost()
                await self._release(keys=[self.key], args=[self.owner])
