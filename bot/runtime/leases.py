"""A named lease in Redis: exactly one replica holds it at a time, and it moves on if that
replica dies. Telegram polling runs only while this process holds its lease.

The lease is redis-py's `Lock` with a timeout, renewed every third of it. A replica that
stops cleanly releases it, and a standby tries every `retry` seconds, so polling moves on
within about a second; after a crash it moves on once the timeout has run out. While Redis
is unreachable the holder keeps the lease until its timeout would have passed (nobody else
can take it meanwhile), and logs once when renewing fails and once when it works again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

import redis.asyncio as aioredis
from redis.exceptions import LockError, LockNotOwnedError, RedisError

log = logging.getLogger(__name__)


class Lease:
    def __init__(
        self, redis: aioredis.Redis, key: str, *, ttl: float = 15.0, retry: float = 1.0
    ) -> None:
        self.key = key
        self.ttl = ttl
        self.retry = min(retry, ttl / 3)
        self.held = False
        self._lock = redis.lock(key, timeout=ttl, blocking=False, thread_local=False)
        self._renewed = 0.0
        self._trouble: str | None = None

    async def hold_while(
        self,
        stop: asyncio.Event,
        on_acquired: Callable[[], Awaitable[None]],
        on_lost: Callable[[], Awaitable[None]],
    ) -> None:
        """Try for the lease until `stop`; run the callbacks as it is won and lost."""
        try:
            while not stop.is_set():
                try:
                    await self._step(on_acquired, on_lost)
                except (RedisError, OSError) as exc:
                    await self._unreachable(exc, on_lost)
                else:
                    if self._trouble is not None:
                        log.info("the lease %s is reachable again", self.key)
                        self._trouble = None
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.ttl / 3 if self.held else self.retry):
                        await stop.wait()
        finally:
            if self.held:
                self.held = False
                try:
                    await on_lost()
                finally:
                    with contextlib.suppress(LockError, RedisError, OSError):
                        await self._lock.release()
                    log.info("released the lease %s", self.key)

    async def _step(
        self, on_acquired: Callable[[], Awaitable[None]], on_lost: Callable[[], Awaitable[None]]
    ) -> None:
        if self.held:
            try:
                await self._lock.reacquire()
            except LockNotOwnedError:
                # Expired (say, Redis came back empty): take it again if nobody else did.
                if not await self._lock.acquire():
                    self.held = False
                    log.warning("lost the lease %s", self.key)
                    await on_lost()
                    return
            self._renewed = time.monotonic()
        elif await self._lock.acquire():
            self.held = True
            self._renewed = time.monotonic()
            log.info("holding the lease %s", self.key)
            await on_acquired()

    async def _unreachable(
        self, exc: BaseException, on_lost: Callable[[], Awaitable[None]]
    ) -> None:
        if self._trouble is None:
            log.warning("cannot reach the lease %s (%s)", self.key, type(exc).__name__)
        self._trouble = type(exc).__name__
        if self.held and time.monotonic() - self._renewed > self.ttl:
            self.held = False  # it has expired by now: another replica may hold it
            log.warning("lost the lease %s", self.key)
            await on_lost()
