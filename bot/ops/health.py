"""Health of the long-running loops: each beats a heartbeat, says when it is in trouble, and
backs off while its dependency (Redis, a platform) is away.

    ok ──pass failed──▶ degraded ──pass succeeded──▶ ok
    ok | degraded ──task ended with an exception──▶ dead        (only a restart helps)
    ok | degraded ──no beat within `every` seconds──▶ wedged    (seen by readiness)

A loop logs one warning when it degrades and one info line when it recovers, however many
passes fail in between. `/readyz` is not ready while a loop is dead or wedged; `/healthz`
fails while one is dead, so an orchestrator restarts the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger(__name__)

State = Literal["ok", "degraded", "dead", "stopped"]

# Redis is away (down, restarting, unreachable, or the pool has no free connection): wait
# and try again. Every other error is the loop's own problem.
REDIS_DOWN: tuple[type[Exception], ...] = (RedisConnectionError, RedisTimeoutError)


def redis_away(exc: BaseException) -> bool:
    """Whether Redis being away is behind `exc` (directly, or as its cause or context)."""
    seen: BaseException | None = exc
    for _ in range(8):  # chains are short; a cycle must not loop forever
        if seen is None:
            return False
        if isinstance(seen, REDIS_DOWN):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class Backoff:
    """Bounded exponential delays with jitter: first, 2×first, … up to `cap`."""

    def __init__(self, first: float = 0.1, cap: float = 5.0) -> None:
        self.first = first
        self.cap = cap
        self.failures = 0

    def next(self) -> float:
        delay = min(self.cap, self.first * 2**self.failures)
        self.failures = min(self.failures + 1, 32)
        return delay * random.uniform(0.5, 1.0)

    def reset(self) -> None:
        self.failures = 0


class Heartbeat:
    """One loop's pulse and state."""

    def __init__(self, name: str, *, every: float) -> None:
        self.name = name
        self.every = every  # most seconds between two beats of a loop that is not stuck
        self.state: State = "ok"
        self.reason = ""
        self.backoff = Backoff()
        self._last: float | None = None  # no beat yet: not started, so not stuck either
        self._since = 0.0

    def beat(self) -> bool:
        """A pass went through; True if that ends a degradation."""
        now = self._last = time.monotonic()
        if self.state != "degraded":
            return False
        self.state, self.reason = "ok", ""
        self.backoff.reset()
        log.info("%s recovered after %.1f s", self.name, now - self._since)
        return True

    def alive(self) -> None:
        """Not stuck, though no pass ran (waiting for room, for instance)."""
        self._last = time.monotonic()

    def degraded(self, reason: str) -> float:
        """A pass failed; returns how long to wait before the next one."""
        now = time.monotonic()
        self._last = now  # failing and retrying is not being stuck
        if self.state == "ok":
            self.state, self.reason, self._since = "degraded", reason, now
            log.warning("%s degraded (%s); retrying in the background", self.name, reason)
        return self.backoff.next()

    def failed(self, exc: BaseException) -> float:
        """A pass raised: Redis being away degrades quietly, anything else also gets a trace
        (once per degradation, like the warning)."""
        if redis_away(exc):
            return self.degraded(f"Redis unreachable: {type(exc).__name__}")
        if self.state == "ok":
            log.error("%s pass failed", self.name, exc_info=exc)
        return self.degraded(type(exc).__name__)

    def ended(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled() or task.exception() is None:
            self.state, self.reason = "stopped", ""
            return
        exc = task.exception()
        self.state, self.reason = "dead", type(exc).__name__
        log.error("%s died; restart the process", self.name, exc_info=exc)

    def wedged(self, now: float) -> bool:
        return (
            self.state in ("ok", "degraded")
            and self._last is not None
            and now - self._last > self.every
        )

    def describe(self, now: float) -> str:
        if self.wedged(now):
            return f"wedged: no beat for {now - (self._last or now):.0f} s"
        return f"{self.state}: {self.reason}" if self.reason else self.state


class Health:
    """Every loop of this process, for `/readyz` and `/healthz`."""

    def __init__(self) -> None:
        self.loops: dict[str, Heartbeat] = {}

    def register(self, name: str, *, every: float) -> Heartbeat:
        heartbeat = Heartbeat(name, every=every)
        self.loops[name] = heartbeat
        return heartbeat

    def watch(self, heartbeat: Heartbeat, task: asyncio.Task[Any]) -> None:
        """Mark the loop dead if its task ends with an exception."""
        heartbeat.beat()
        task.add_done_callback(heartbeat.ended)

    async def readiness(self) -> tuple[bool, str]:
        now = time.monotonic()
        bad = {
            n: h.describe(now) for n, h in self.loops.items() if h.state == "dead" or h.wedged(now)
        }
        if bad:
            return False, "; ".join(f"{n} {d}" for n, d in bad.items())
        return True, ", ".join(f"{n} {h.describe(now)}" for n, h in self.loops.items()) or "none"

    async def liveness(self) -> tuple[bool, str]:
        dead = [f"{n} dead: {h.reason}" for n, h in self.loops.items() if h.state == "dead"]
        return (False, "; ".join(dead)) if dead else (True, "no loop died")


async def pause(stop: asyncio.Event, seconds: float) -> None:
    """Sleep, but wake as soon as `stop` is set (a loop's only pause, so stopping is prompt)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await stop.wait()


async def repeat(
    stop: asyncio.Event, heartbeat: Heartbeat, one_pass: Callable[[], Awaitable[Any]], every: float
) -> None:
    """Run `one_pass` every `every` seconds until `stop`; a failed pass degrades `heartbeat`
    and is tried again after its backoff."""
    while not stop.is_set():
        try:
            await one_pass()
        except Exception as exc:
            await pause(stop, heartbeat.failed(exc))
            continue
        heartbeat.beat()
        await pause(stop, every)
