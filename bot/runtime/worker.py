"""Workers: read the inbox stream in a consumer group and handle each conversation in order.

Every entry read is put on its conversation's backlog (a sorted set ordered by entry id) as
the worker tries that conversation's lock, in the same script. Whoever holds the lock drains
the backlog oldest first, so entries of one conversation are handled one at a time and in
order, whichever worker read them. An entry is acknowledged only after its effects are
stored, with the holder's next write (or next read, if its save let go of the lock); entries
left by a dead worker are claimed again by the reclaimer (`bot/runtime/reclaimer.py`).

Faults: while Redis is away every loop backs off and tries again, and conversations cut off
mid-way are taken up again once it is back (their entries stay pending until acknowledged).
Entries that cannot be decoded or keep failing go to the dead-letter stream
(`bot/runtime/failures.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from adapters.base import Inbound
from bot.ops import metrics
from bot.ops.health import REDIS_DOWN, Health, redis_away
from bot.ops.shutdown import STILL_RUNNING, describe, settle
from bot.runtime.codec import as_text
from bot.runtime.failures import CutShort, Failures, OnError
from bot.runtime.inbox import decode_entry, queued_at_of
from bot.runtime.keys import Keys, backlog_member, entry_of
from bot.runtime.locks import ConversationLocks, Holding, LockLost, while_held
from bot.runtime.reclaimer import GROUP, Reclaimer, ensure_group, group_gone
from bot.runtime.stops import StopRequest, Stops
from loops import Running, Stopped, pause, repeat

log = logging.getLogger(__name__)

READ_CACHE = 10_000  # read events kept for their handling; the rest are read again
ROOM_CHECK = 1.0  # seconds between two heartbeats while the worker waits for room
Handler = Callable[[str, Inbound, Holding], Awaitable[None]]
Processed = Literal["done", "retry", "lost"]


class Worker:
    def __init__(
        self,
        redis: aioredis.Redis,
        keys: Keys,
        locks: ConversationLocks,
        handle: Handler,
        *,
        on_error: OnError | None = None,
        concurrency: int = 8,
        reclaim_idle: float = 60.0,
        attempts_ttl: float = 86_400.0,
        block: float = 1.0,
        name: str | None = None,
        max_attempts: int = 3,
        health: Health | None = None,
        stops: Stops | None = None,
        is_stop: Callable[[Inbound], bool] | None = None,
    ) -> None:
        self.redis = redis
        self.stops = stops
        # which entries ask to stop a run: the conversation's rule, handed in (the worker
        # reads no chat command); without one, no stop reaches a run early
        self.is_stop = is_stop or never
        self.keys = keys
        self.locks = locks
        self.handle = handle
        self.concurrency = concurrency
        self.block_ms = int(block * 1000)
        self.name = name or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        health = health or Health()
        self.reading = health.register("worker", every=max(30.0, 10 * block))
        self.reclaiming = health.register("reclaimer", every=max(0.05, reclaim_idle / 2) + 30.0)
        self._health = health
        self.failures = Failures(
            redis, keys, max_attempts=max_attempts, attempts_ttl=attempts_ttl, on_error=on_error
        )
        self.reclaimer = Reclaimer(
            redis, keys, self.name, self._accept, self.reclaiming, reclaim_idle=reclaim_idle
        )
        # Conversations cut off by an outage or a lost lock, taken up again after a good read.
        self._stalled: set[str] = set()
        self._slots = asyncio.Semaphore(concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self._most_tasks = concurrency * 4  # reading pauses while this many wait or run
        self._room = asyncio.Event()
        self._room.set()
        self._stopping = asyncio.Event()
        self._grouped = False  # the consumer group exists (made by the first pass)
        # Events this worker read, so handling one needs no second read of the stream.
        self._read_events: OrderedDict[str, Inbound] = OrderedDict()
        # Backlog members read but not yet on their backlog (the next lock try puts them).
        self._arrived: dict[str, dict[str, bool]] = {}  # → on its first delivery
        self._acks: list[str] = []  # stored entries whose save let go: XACKed with the next read

    async def ensure_group(self) -> None:
        await ensure_group(self.redis, self.keys)

    async def run(self) -> None:
        """Consume until `stop()`; then let in-flight work finish (the caller bounds the wait)."""
        log.info("worker %s consuming %s", self.name, self.keys.inbox)
        async with Running(self._stopping) as loops:
            loops.start(self.reclaimer.run(self._stopping), self.reclaiming)
            # a read is bounded by its block time: the stop waits for it rather than cut it
            await repeat(self._stopping, self.reading, self._one_pass, 0.0, interrupt=False)

    async def _one_pass(self) -> None:
        """Wait for room, then read new entries and take them up."""
        while not self._room.is_set():
            self.reading.alive()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(ROOM_CHECK):
                    await self._room.wait()
        if self._stopping.is_set():
            raise Stopped
        if not self._grouped:
            await self.ensure_group()
            self._grouped = True
        entries = await self._read()
        if self.reading.beat():  # back after an outage
            await self._accept_own_pending()
        self._take_up_stalled()
        if entries:
            await self._accept(entries, first=True)

    def stop(self) -> None:
        self._stopping.set()
        self._room.set()

    async def drain(self, grace: float, cancel_grace: float) -> None:
        """Wait for in-flight work; cancel what is left (its entries stay for another worker)
        and give it `cancel_grace` to end: what ignores that is named and left behind."""
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=grace)
            if pending:
                log.warning("handing back %d unfinished conversations", len(pending))
                if left := await settle(pending, cancel_grace):
                    log.error(STILL_RUNNING, describe(left))

    async def leave(self) -> None:
        if self._acks:  # else they replay as no-ops
            with contextlib.suppress(*REDIS_DOWN):
                await self.redis.xack(self.keys.inbox, GROUP, *self._acks)
        await self.reclaimer.leave()

    async def _read(self) -> list[tuple[bytes, dict[bytes, bytes]]]:
        acks, self._acks = self._acks, []
        try:
            response = await self._read_group(">", acks)
        except BaseException:
            self._acks[:0] = acks
            raise
        return list(response[0][1]) if response else []

    async def _read_group(self, start: str, acks: Sequence[str] = ()) -> Any:
        block = self.block_ms if start == ">" else None
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                if acks:
                    pipe.xack(self.keys.inbox, GROUP, *acks)
                pipe.xreadgroup(
                    GROUP, self.name, {self.keys.inbox: start}, self.concurrency * 2, block
                )
                return (await pipe.execute())[-1]
        except ResponseError as exc:
            if not group_gone(exc):
                raise
            log.warning("the consumer group is gone (did Redis lose its data?); creating it")
            await self.ensure_group()
            return None

    async def _accept_own_pending(self) -> None:
        """Take up again what this worker had read when Redis went away (bounded)."""
        start = "0-0"
        for _ in range(100):
            response = await self._read_group(start)
            entries = list(response[0][1]) if response else []
            if not entries:
                return
            await self._accept(entries)
            last = entries[-1][0]
            start = as_text(last)

    def _take_up_stalled(self) -> None:
        stalled, self._stalled = self._stalled, set()
        for conversation in stalled:
            self._spawn(conversation)

    async def _accept(
        self, entries: Sequence[tuple[bytes | str, dict[bytes, bytes] | None]], first: bool = False
    ) -> None:
        """Note entries for their drains (`first`: read with '>'); dead-letter bad ones."""
        conversations: dict[str, None] = {}  # ordered, without repeats
        settled: list[tuple[str, dict[bytes, bytes] | None, Exception | None]] = []
        stops: list[StopRequest] = []
        for entry_id, fields in entries:
            entry = as_text(entry_id)
            if not fields:  # trimmed away: nothing to do
                settled.append((entry, None, None))
                continue
            try:
                event, conversation = decode_entry(fields)
            except Exception as undecodable:
                settled.append((entry, fields, undecodable))
                continue
            if queued_at := queued_at_of(fields):
                metrics.QUEUE_LAG.observe(max(0.0, time.time() - queued_at))
            self._read_events[entry] = event
            self._arrived.setdefault(conversation, {})[backlog_member(entry)] = first
            conversations[conversation] = None
            if first and self.is_stop(event):
                groups = event.actor.groups
                stops.append(
                    StopRequest(
                        conversation_id=conversation,
                        entry_id=entry,
                        user_id=event.actor.user_id,
                        groups=groups,
                    )
                )
        if settled:
            await self.failures.settle_unreadable(settled)
        if stops:
            await self._signal(stops)
        while len(self._read_events) > READ_CACHE:
            self._read_events.popitem(last=False)
        for conversation in conversations:
            self._spawn(conversation)

    async def _signal(self, requests: list[StopRequest]) -> None:
        """Tell a running run of each conversation to stop, before the request waits its
        turn (set before the entry is on its backlog, so before it can be handled)."""
        if self.stops is None:
            return
        for request in requests:
            try:
                await self.stops.request(request)
            except Exception as exc:  # the entry is still handled in turn
                log.warning(
                    "could not signal a stop in %s (%s)",
                    request.conversation_id,
                    type(exc).__name__,
                )

    def _spawn(self, conversation: str) -> None:
        task = asyncio.create_task(self._drain_conversation(conversation))
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        if len(self._tasks) >= self._most_tasks:
            self._room.clear()

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if len(self._tasks) < self._most_tasks:
            self._room.set()

    async def _drain_conversation(self, conversation: str) -> None:
        try:
            await self._drain(conversation)
        except Exception as exc:
            if not redis_away(exc):
                log.exception("draining %s failed; the reclaimer will take it up", conversation)
                return
            # Its entries stay pending: taken up again after a good read (the reading loop
            # says when Redis is away; one line per conversation is noise).
            self._stalled.add(conversation)
            log.debug("%s cut off (%s); will take it up again", conversation, type(exc).__name__)

    async def _drain(self, conversation: str) -> None:
        async with self._slots:
            arrived = self._arrived.get(conversation, {})
            adding = dict(arrived)
            first = [member for member, fresh in adding.items() if fresh]
            again = [member for member, fresh in adding.items() if not fresh]
            try:
                holding = await self.locks.try_acquire(conversation, again, first)
            except BaseException:  # taken up again later, unless it is on the backlog now
                self._arrived.setdefault(conversation, {}).update(dict.fromkeys(adding, False))
                raise
            for member in adding:  # on the backlog now
                arrived.pop(member, None)
            if not arrived:
                self._arrived.pop(conversation, None)
            if holding is None:
                return  # its holder drains the backlog, our entries included
            released = await self._hold(holding)
        if holding.lost or not released:
            self._stalled.add(conversation)  # whoever holds it now drains; else we do
        elif holding.cursor.remaining and not self._stopping.is_set():
            self._spawn(conversation)  # an entry arrived as the lock went (a lost race)

    async def _hold(self, holding: Holding) -> bool:
        """Drain the backlog under the lock. The last session save lets go of it; if not, one
        round trip does, or keeps it while entries wait (they came as the last one finished)
        to drain them without taking it again. False if Redis did not take it."""
        while True:
            try:
                async with self.locks.kept(holding):
                    await self._work(holding)
            except BaseException:
                await self.locks.let_go(holding)
                raise
            if holding.released:  # by the last session save: nothing waited
                self._acks += holding.writes.acks
                return True
            keep = not holding.lost and not self._stopping.is_set()
            released = await self.locks.let_go(holding, keep_if_waiting=keep)
            if not (released and holding.cursor.kept):
                return released

    async def _work(self, holding: Holding) -> None:
        """Handle the backlog, oldest first, while the lease holds. A handled entry is
        acknowledged after its session is stored, with the holder's next write (a save, a
        renewal, the release) or the next read: a crash before that replays it, and the
        stored session's `last_entry` makes the replay a no-op."""
        cursor = holding.cursor
        head = cursor.head
        while head is not None and not holding.lost:
            entry = entry_of(head)
            cursor.let_go_after = head  # its session save lets go of the lock if none waits
            cursor.done = None  # set again only by this entry's own save (a replay stores none)
            processed = await self._process(entry, holding)
            if processed == "lost":
                holding.lose()
                return
            if processed == "retry":
                if self._stopping.is_set():
                    return  # it stays pending for whoever runs next
                continue
            holding.writes.acks.append(entry)
            if cursor.done == head:  # the session save took it off and read the next
                head = cursor.head
                continue
            # Nothing stored for it (done before, or given up): take it off ourselves.
            await self.locks.skip(holding, head)
            head = cursor.head

    async def _process(self, entry: str, holding: Holding) -> Processed:
        """Handle one entry: done (acknowledge it), retry (keep it), or lost (the lock)."""
        event = self._read_events.pop(entry, None)
        fields: dict[bytes, bytes] | None = None
        conversation, cursor = holding.conversation_id, holding.cursor
        if event is None:  # read by another worker, or before a restart
            found = await self.redis.xrange(self.keys.inbox, min=entry, max=entry)
            if not found:
                return "done"  # trimmed long ago
            fields = found[0][1]  # type: ignore[assignment]
            try:
                event, _ = decode_entry(fields or {})
            except Exception as exc:
                await self.failures.quarantine(
                    conversation, entry, fields, "undecodable", exc, attempts=0
                )
                return "done"
        tries = cursor.tries.get(entry, 1)  # counted as it was told it is next
        if tries > self.failures.max_attempts:  # the earlier tries never finished
            log.warning("inbox entry %s: %d tries did not finish", entry, tries - 1)
            cut = CutShort(f"{tries - 1} tries did not finish")
            await self.failures.give_up(conversation, entry, event, fields, cut, attempts=tries - 1)
            cursor.untried.discard(entry)
            return "done"
        try:
            await while_held(holding, self.handle(entry, event, holding))
        except LockLost:
            log.warning("lock of %s lost while handling %s", conversation, entry)
            self._read_events[entry] = event
            return "lost"
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if redis_away(exc):  # not the entry's fault: it is tried again once Redis is back
                self._read_events[entry] = event
                raise
            delay = self.failures.failed(entry, exc, tries)
            if delay:
                self._read_events[entry] = event
                await pause(self._stopping, delay)
                if not self._stopping.is_set():  # else the next holder counts its try
                    cursor.tries[entry] = await self.failures.begin_again(conversation, entry)
                return "retry"
            await self.failures.give_up(conversation, entry, event, fields, exc, attempts=tries)
        finally:
            cursor.untried.discard(entry)
        return "done"


def never(event: Inbound) -> bool:
    return False
