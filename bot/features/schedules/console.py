"""Reminders and schedules in `parley console`: made, listed, paused and cancelled as in the
chats, and run while the console is open.

A reminder is printed when it is due. A schedule is stored like the service's (the same
`ScheduleStore`, so the same checks and the same `/schedules` list) under a key prefix of
this console session's own, so neither a running service nor another console ever starts
its slots; this session's clock starts them (`ScheduleClock`, into the session's own inbox
stream), and the console runs each one between the person's requests. Leaving the console
ends its schedules, as it ends its reminders.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TextIO

import redis.asyncio as aioredis

from adapters.base import Inbound
from agent.protocols import RunContext
from bot.config import Settings
from bot.features.schedules.clock import ScheduleClock
from bot.features.schedules.store import BookOf, ScheduleStore
from bot.ops.health import redis_reason
from bot.runtime.inbox import decode_entry
from bot.runtime.keys import Keys
from loops import Heartbeat, Running, repeat

log = logging.getLogger(__name__)

ENDED = "({count} schedule{s} made here end{verb} with this console session.)"


class ConsoleScheduler(BookOf):
    """The console agent's reminders (printed when due) and schedule book."""

    def __init__(self, out: TextIO, book: ScheduleStore | None = None) -> None:
        self.out = out
        self.book = book
        self.tasks: set[asyncio.Task[None]] = set()

    async def schedule_reminder(self, text: str, due_at: float, context: RunContext) -> str:
        async def later() -> None:
            await asyncio.sleep(max(0.0, due_at - time.time()))
            print(f"\n⏰ Reminder: {text}", file=self.out, flush=True)

        task = asyncio.create_task(later())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return f"console-{len(self.tasks)}"

    async def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class ConsoleSchedules:
    """This console session's schedules, their clock, and the slots due to run."""

    def __init__(
        self, redis: aioredis.Redis, settings: Settings, session: str, *, poll: float = 1.0
    ) -> None:
        self.redis = redis
        self.keys = Keys(f"{settings.redis.key_prefix}:console:{session}")
        self.store = ScheduleStore(
            redis,
            self.keys,
            min_interval=settings.schedules.min_interval,
            approvers=frozenset(settings.access.approvers),
        )
        self.clock = ScheduleClock(
            redis, self.keys, self.store, dedup_ttl=settings.runtime.dedup_ttl, poll=poll
        )
        self.poll = poll
        self.due: asyncio.Queue[Inbound] = asyncio.Queue()
        self._loops = Running()
        self._last = "0-0"  # the last inbox entry handed to the console
        # Redis away: one line when it goes and one when it is back, as the service's clock
        self.heartbeat = Heartbeat(
            "console schedules", every=poll + 30.0, away=redis_reason, logger=log
        )

    def start(self) -> None:
        self._loops.start(
            repeat(self._loops.stop, self.heartbeat, self._one_pass, self.poll), self.heartbeat
        )

    async def _one_pass(self) -> None:
        """Start due slots and hand each started one to the console."""
        await self.clock.start_due()
        read: list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]]
        read = await self.redis.xread({self.keys.inbox: self._last}, count=10)  # type: ignore[assignment]
        for _stream, entries in read or []:
            for entry_id, fields in entries:
                self._last = entry_id.decode()
                event, _ = decode_entry(fields)
                self.due.put_nowait(event)

    async def close(self) -> int:
        """Stop the clock and delete this session's schedules; returns how many there were."""
        await self._loops.close()
        found = await self.store.everything()
        for schedule, _ in found:
            await self.store.delete(schedule)
        marks = [key async for key in self.redis.scan_iter(match=f"{self.keys.prefix}:dedup:*")]
        await self.redis.delete(self.keys.inbox, *marks)
        return len(found)


def ended(count: int) -> str:
    return ENDED.format(count=count, s="" if count == 1 else "s", verb="s" if count == 1 else "")
