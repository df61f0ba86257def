"""Long-running loops, written once: a pass raced against the stop, a backoff while a
dependency is away, a heartbeat, and one `async with` lifecycle for the loops of a part.

    ok ──pass failed──▶ degraded ──pass succeeded──▶ ok
    ok | degraded ──task ended with an exception──▶ dead        (only a restart helps)
    ok | degraded ──no beat within `every` seconds──▶ wedged    (seen by readiness)

A loop logs one warning when it degrades and one info line when it recovers, however many
passes fail in between. As in python-telegram-bot's `network_retry_loop`, each pass races
the stop event: when the stop wins, the pass is cancelled once and the loop ends, whatever
the pass makes of its cancellation (an HTTP client may turn it into a timeout; the loop does
not take that for a failed pass to try again). As with anyio's cancel scopes, stopping is
level-triggered: the stop event stays set, so no await after it starts another pass.

This package sits below `adapters` and `bot` and imports neither: both run their loops here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Literal, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
State = Literal["ok", "degraded", "dead", "stopped"]
# What a failed pass means: a reason when its dependency is away (the loop degrades quietly
# and tries again), None when it is the loop's own problem (logged with a trace, once).
Away = Callable[[BaseException], str | None]
CANCEL_GRACE = 5.0  # seconds a cancelled pass may take to end before it is left behind


class Stopped(Exception):
    """The stop won the race against a pass."""


def exponential(first: float, cap: float, tries: int) -> float:
    """The one backoff formula: first, 2×first, 4×first, … never more than `cap` (a loop's
    `Backoff` draws each delay from its upper half; a stored retry time uses it as is)."""
    return min(cap, first * 2 ** min(tries, 32))


class Backoff:
    """Bounded exponential delays with jitter: `exponential`, each drawn from its upper half."""

    def __init__(self, first: float = 0.1, cap: float = 5.0) -> None:
        self.first = first
        self.cap = cap
        self.failures = 0

    def next(self) -> float:
        delay = exponential(self.first, self.cap, self.failures)
        self.failures = min(self.failures + 1, 32)
        return delay * random.uniform(0.5, 1.0)

    def reset(self) -> None:
        self.failures = 0


def _nothing_away(exc: BaseException) -> str | None:
    return None


class Heartbeat:
    """One loop's pulse and state."""

    def __init__(
        self,
        name: str,
        *,
        every: float,
        away: Away = _nothing_away,
        backoff: Backoff | None = None,
        logger: logging.Logger | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.every = every  # most seconds between two beats of a loop that is not stuck
        self.state: State = "ok"
        self.reason = ""
        self.away = away
        self.backoff = backoff or Backoff()
        self.log = logger or log  # the degraded and recovered lines go to the loop's owner
        self.clock = clock  # seconds, monotonic; a test's own clock needs no waiting
        self._last: float | None = None  # no beat yet: not started, so not stuck either
        self._since = 0.0

    def beat(self) -> bool:
        """A pass went through; True if that ends a degradation."""
        now = self._last = self.clock()
        if self.state != "degraded":
            return False
        self.state, self.reason = "ok", ""
        self.backoff.reset()
        self.log.info("%s recovered after %.1f s", self.name, now - self._since)
        return True

    def alive(self) -> None:
        """Not stuck, though no pass ran (waiting for room, for instance)."""
        self._last = self.clock()

    def degraded(self, reason: str) -> float:
        """A pass failed; returns how long to wait before the next one."""
        now = self.clock()
        self._last = now  # failing and retrying is not being stuck
        if self.state == "ok":
            self.state, self.reason, self._since = "degraded", reason, now
            self.log.warning("%s degraded (%s); retrying in the background", self.name, reason)
        return self.backoff.next()

    def failed(self, exc: BaseException) -> float:
        """A pass raised: its dependency being away degrades quietly, anything else also gets
        a trace (once per degradation, like the warning)."""
        if (reason := self.away(exc)) is not None:
            return self.degraded(reason)
        if self.state == "ok":
            self.log.error("%s pass failed", self.name, exc_info=exc)
        return self.degraded(type(exc).__name__)

    def ended(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled() or task.exception() is None:
            self.state, self.reason = "stopped", ""
            return
        exc = task.exception()
        self.state, self.reason = "dead", type(exc).__name__
        self.log.error("%s died; restart the process", self.name, exc_info=exc)

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


async def pause(stop: asyncio.Event, seconds: float) -> None:
    """Sleep, but wake as soon as `stop` is set (a loop's only pause, so stopping is prompt)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await stop.wait()


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # looked at: a pass given up on is not "never retrieved"


async def race(
    stop: asyncio.Event, work: Coroutine[Any, Any, T], *, grace: float = CANCEL_GRACE
) -> T:
    """`work`'s result, or `Stopped` once `stop` is set first: then `work` is cancelled once
    and given `grace` seconds to end; one that ignores its cancellation is left behind."""
    if stop.is_set():
        work.close()
        raise Stopped
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        stopper.cancel()
    if task.done():
        return task.result()
    task.add_done_callback(_retrieve)
    task.cancel()
    await asyncio.wait({task}, timeout=grace)
    if not task.done():
        log.error("a pass ignored its cancellation for %.0f s; leaving it behind", grace)
    raise Stopped


async def repeat(
    stop: asyncio.Event,
    heartbeat: Heartbeat,
    one_pass: Callable[[], Coroutine[Any, Any, Any]],
    every: float | Callable[[], float],
    *,
    asked_wait: Callable[[BaseException], float | None] | None = None,
    interrupt: bool = True,
) -> None:
    """Run `one_pass` every `every` seconds until `stop`; a failed pass degrades `heartbeat`
    and is tried again after its backoff (or after the wait the failure asks for, such as a
    rate limit's `retry_after`). A pass races the stop unless `interrupt` is False (for a
    pass that must not be cut short and is bounded by its own timeouts)."""
    while not stop.is_set():
        try:
            if interrupt:
                await race(stop, one_pass())
            else:
                await one_pass()
        except Stopped:
            return
        except Exception as exc:
            delay = heartbeat.failed(exc)
            if asked_wait is not None and (asked := asked_wait(exc)) is not None:
                delay = asked
            await pause(stop, delay)
            continue
        heartbeat.beat()
        await pause(stop, every() if callable(every) else every)


class Running:
    """The loops of one long-lived part, with one lifecycle:

        async with Running(stop, grace=5) as loops:
            loops.start(poll(stop), heartbeat)
            ...

    Leaving (or `close()`) sets `stop`, gives the loops `grace` seconds to end, cancels what
    is left once and gives that `grace` more; what still runs is in `left` (the caller names
    it: nothing waits for ever on a task that ignores its cancellation)."""

    def __init__(self, stop: asyncio.Event | None = None, *, grace: float = CANCEL_GRACE) -> None:
        self.stop = stop or asyncio.Event()
        self.grace = grace
        self.tasks: set[asyncio.Task[Any]] = set()
        self.left: set[asyncio.Task[Any]] = set()

    def start(
        self, loop: Coroutine[Any, Any, Any], heartbeat: Heartbeat | None = None
    ) -> asyncio.Task[Any]:
        task = asyncio.create_task(loop)
        self.tasks.add(task)
        if heartbeat is not None:  # a loop that ends with an exception is dead
            heartbeat.beat()
            task.add_done_callback(heartbeat.ended)
        return task

    @property
    def running(self) -> bool:
        return any(not task.done() for task in self.tasks)

    async def close(self) -> set[asyncio.Task[Any]]:
        self.stop.set()
        pending = {task for task in self.tasks if not task.done()}
        if pending:
            _, pending = await asyncio.wait(pending, timeout=self.grace)
        for task in pending:
            task.cancel()
        if pending:
            _, pending = await asyncio.wait(pending, timeout=self.grace)
        for task in pending:
            task.add_done_callback(_retrieve)
        self.left = pending
        return pending

    async def __aenter__(self) -> Running:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()
