"""A named lease in Redis: exactly one replica holds it at a time, and it moves on if that
replica dies. Telegram polling runs only while this process holds its lease.

The lease is redis-py's `Lock` with a timeout, renewed every third of it (`reacquire`, which
checks our token). A replica that stops cleanly releases it, and a standby tries every
`retry` seconds, so polling moves on within about a second; after a crash it moves on once
the timeout has run out. While Redis is unreachable the holder keeps the lease until its
timeout would have passed (nobody else can take it meanwhile). Like every long-running loop
it beats a heartbeat (`bot/ops/health.py`), which logs once when it degrades and once when
it recovers, and backs off while Redis is away.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

import redis.asyncio as aioredis
from redis.exceptions import LockError, LockNotOwnedError, RedisError

from bot.ops.health import Health
from loops import repeat

log = logging.getLogger(__name__)


class Lease:
    def __init__(
        self,
        redis: aioredis.Redis,
        key: str,
        *,
        ttl: float = 15.0,
        retry: float = 1.0,
        health: Health | None = None,
    ) -> None:
        self.key = key
        self.ttl = ttl
        self.retry = min(retry, ttl / 3)
        self.held = False
        # Whether an attempt has had an answer: until then nobody knows who holds it.
        self.tried = False
        self._lock = redis.lock(key, timeout=ttl, blocking=False, thread_local=False)
        self._renewed = 0.0
        name = f"lease {key.rsplit(':', 1)[-1]}"
        self.heartbeat = (health or Health()).register(name, every=ttl + 30.0)

    async def hold_while(
        self,
        stop: asyncio.Event,
        on_acquired: Callable[[], Awaitable[None]],
        on_lost: Callable[[], Awaitable[None]],
    ) -> None:
        """Try for the lease until `stop`; run the callbacks as it is won and lost."""

        async def one_pass() -> None:
            try:
                await self._step(on_acquired, on_lost)
            except (RedisError, OSError):
                await self._unreachable(on_lost)
                raise
            self.tried = True

        def every() -> float:
            return self.ttl / 3 if self.held else self.retry

        # the callbacks start and stop polling: a pass is not cut short by the stop
        self.heartbeat.backoff.cap = min(self.heartbeat.backoff.cap, self.retry)
        try:
            await repeat(stop, self.heartbeat, one_pass, every, interrupt=False)
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

    async def _unreachable(self, on_lost: Callable[[], Awaitable[None]]) -> None:
        if self.held and time.monotonic() - self._renewed > self.ttl:
            self.held = False  # it has expired by now: another replica may hold it
            log.warning("lost the lease %s", self.key)
            await on_lost()
