"""Health of the long-running loops: each beats a heartbeat, says when it is in trouble, and
backs off while its dependency (Redis, a platform) is away. The loop itself (pass, stop race,
backoff, heartbeat) is `loops`; this module knows Redis and answers the probes.

    ok ──pass failed──▶ degraded ──pass succeeded──▶ ok
    ok | degraded ──task ended with an exception──▶ dead        (only a restart helps)
    ok | degraded ──no beat within `every` seconds──▶ wedged    (seen by readiness)

A loop logs one warning when it degrades and one info line when it recovers, however many
passes fail in between. `/readyz` is not ready while a loop is dead or wedged; `/healthz`
fails while one is dead, so an orchestrator restarts the process.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from loops import Backoff, Heartbeat, pause, repeat

log = logging.getLogger(__name__)

__all__ = ["REDIS_DOWN", "Backoff", "Health", "Heartbeat", "pause", "redis_away", "repeat"]

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


def redis_reason(exc: BaseException) -> str | None:
    """A loop's `away`: Redis being away is an outage to wait out, not the loop's fault."""
    return f"Redis unreachable: {type(exc).__name__}" if redis_away(exc) else None


class Health:
    """Every loop of this process, for `/readyz` and `/healthz`."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.loops: dict[str, Heartbeat] = {}
        self.clock = clock  # what the heartbeats and readiness read (monotonic seconds)

    def register(self, name: str, *, every: float) -> Heartbeat:
        heartbeat = Heartbeat(name, every=every, away=redis_reason, logger=log, clock=self.clock)
        self.loops[name] = heartbeat
        return heartbeat

    def watch(self, heartbeat: Heartbeat, task: asyncio.Task[Any]) -> None:
        """Mark the loop dead if its task ends with an exception."""
        heartbeat.beat()
        task.add_done_callback(heartbeat.ended)

    async def readiness(self) -> tuple[bool, str]:
        now = self.clock()
        bad = {
            n: h.describe(now) for n, h in self.loops.items() if h.state == "dead" or h.wedged(now)
        }
        if bad:
            return False, "; ".join(f"{n} {d}" for n, d in bad.items())
        return True, ", ".join(f"{n} {h.describe(now)}" for n, h in self.loops.items()) or "none"

    async def liveness(self) -> tuple[bool, str]:
        dead = [f"{n} dead: {h.reason}" for n, h in self.loops.items() if h.state == "dead"]
        return (False, "; ".join(dead)) if dead else (True, "no loop died")
