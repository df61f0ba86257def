"""One run at a time per conversation: a leased Redis lock with a fencing token.

The lease is renewed while the holder works. Every write of conversation state checks, in
the same Lua script, that the writer still holds the lock, so a worker that stalled past its
lease cannot overwrite what a newer holder wrote. While Redis is away the renewal keeps
trying until the lease would have run out; a lock that could not be released then is
released on this process's next try for that conversation, so no outage leaves it stuck.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator

import redis.asyncio as aioredis

from bot.ops.health import REDIS_DOWN, redis_away
from bot.runtime.keys import Keys

log = logging.getLogger(__name__)

_ACQUIRE = """
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local token = redis.call('incr', KEYS[2])
  redis.call('pexpire', KEYS[2], ARGV[3])
  redis.call('set', KEYS[1], ARGV[1] .. ':' .. token, 'PX', ARGV[2])
  return token
end
return false
"""

_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""

_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


class LockLost(Exception):
    """The lease ran out and another worker may hold the conversation now."""


class Lease:
    """A held conversation lock: `value` proves it, `token` orders holders."""

    def __init__(self, conversation_id: str, value: str, token: int) -> None:
        self.conversation_id = conversation_id
        self.value = value
        self.token = token
        self._lost = asyncio.Event()

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    @lost.setter
    def lost(self, value: bool) -> None:
        if value:
            self._lost.set()
        else:
            self._lost.clear()

    async def wait_lost(self) -> None:
        await self._lost.wait()


class ConversationLocks:
    def __init__(self, redis: aioredis.Redis, keys: Keys, *, lease: float, fence_ttl: float):
        self.redis = redis
        self.keys = keys
        self.lease_ms = int(lease * 1000)
        self.fence_ttl_ms = int(fence_ttl * 1000)
        self.owner = uuid.uuid4().hex[:12]
        self._acquire = redis.register_script(_ACQUIRE)
        self._renew = redis.register_script(_RENEW)
        self._release = redis.register_script(_RELEASE)
        # Leases whose release failed (Redis was away), released before the next try.
        self._unreleased: dict[str, Lease] = {}

    async def try_acquire(self, conversation_id: str) -> Lease | None:
        if (stale := self._unreleased.pop(conversation_id, None)) is not None:
            try:
                await self.release(stale)
            except BaseException:
                self._unreleased[conversation_id] = stale
                raise
        keys = [self.keys.lock(conversation_id), self.keys.fence(conversation_id)]
        token = await self._acquire(keys=keys, args=[self.owner, self.lease_ms, self.fence_ttl_ms])
        if token is None:
            return None
        return Lease(conversation_id, f"{self.owner}:{int(token)}", int(token))

    async def release(self, lease: Lease) -> None:
        await self._release(keys=[self.keys.lock(lease.conversation_id)], args=[lease.value])

    @contextlib.asynccontextmanager
    async def held(self, conversation_id: str) -> AsyncIterator[Lease | None]:
        """Hold the lock (renewing it) for the block; yields None when someone else holds it."""
        lease = await self.try_acquire(conversation_id)
        if lease is None:
            yield None
            return
        renewer = asyncio.create_task(self._keep(lease))
        try:
            yield lease
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
            try:
                await self.release(lease)
            except Exception as exc:  # the lease runs out anyway; never fail the caller here
                if redis_away(exc):
                    self._unreleased[conversation_id] = lease

    async def _keep(self, lease: Lease) -> None:
        key = self.keys.lock(lease.conversation_id)
        renewed = time.monotonic()
        while True:
            await asyncio.sleep(self.lease_ms / 3000)
            try:
                kept = await self._renew(keys=[key], args=[lease.value, self.lease_ms])
            except REDIS_DOWN:
                if time.monotonic() - renewed < self.lease_ms / 1000:
                    continue  # Redis may be back before the lease runs out
                kept = False
            if not kept:
                lease.lost = True
                log.warning("lost the lock of %s", lease.conversation_id)
                return
            renewed = time.monotonic()
