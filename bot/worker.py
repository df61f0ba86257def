"""Workers: read the inbox stream in a consumer group and handle each conversation in order.

Every entry read is first put on its conversation's backlog (a sorted set ordered by entry
id). Whoever holds the conversation's lock drains that backlog oldest first, so entries of
one conversation are handled one at a time and in order, whichever worker read them. An
entry is acknowledged only after its effects are stored; entries left by a dead worker are
claimed again (XAUTOCLAIM) once idle long enough, and put back on their backlog.
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
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from adapters.base import Inbound
from bot import metrics
from bot.inbox import decode
from bot.keys import Keys
from bot.locks import ConversationLocks, Lease, LockLost

log = logging.getLogger(__name__)

GROUP = "workers"
READ_CACHE = 10_000  # read events kept for their handling; the rest are read again
Handler = Callable[[str, Inbound, Lease], Awaitable[None]]
OnError = Callable[[str, Inbound], Awaitable[None]]


def backlog_member(entry_id: str) -> str:
    """Zero-padded so that lexical order is entry order."""
    ms, _, seq = entry_id.partition("-")
    return f"{int(ms):015d}-{int(seq or 0):010d}"


def entry_of(member: bytes | str) -> str:
    text = member.decode() if isinstance(member, bytes) else member
    ms, _, seq = text.partition("-")
    return f"{int(ms)}-{int(seq)}"


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
        backlog_ttl: float = 86_400.0,
        block: float = 1.0,
        name: str | None = None,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.locks = locks
        self.handle = handle
        self.on_error = on_error
        self.concurrency = concurrency
        self.reclaim_idle = reclaim_idle
        self.backlog_ttl_ms = int(backlog_ttl * 1000)
        self.block_ms = int(block * 1000)
        self.name = name or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self._slots = asyncio.Semaphore(concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = asyncio.Event()
        # Events this worker read, so handling one needs no second read of the stream.
        self._read_events: OrderedDict[str, Inbound] = OrderedDict()

    async def ensure_group(self) -> None:
        try:
            await self.redis.xgroup_create(self.keys.inbox, GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def run(self) -> None:
        """Consume until `stop()`; then let in-flight work finish (the caller bounds the wait)."""
        await self.ensure_group()
        log.info("worker %s consuming %s", self.name, self.keys.inbox)
        reclaimer = asyncio.create_task(self._reclaim_forever())
        try:
            while not self._stopping.is_set():
                if len(self._tasks) >= self.concurrency * 4:
                    await asyncio.sleep(0.005)
                    continue
                if entries := await self._read():
                    await self._accept(entries)
        finally:
            reclaimer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reclaimer

    def stop(self) -> None:
        self._stopping.set()

    async def drain(self, grace: float) -> None:
        """Wait for in-flight work; cancel what is left (its entries stay for another worker)."""
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=grace)
            for task in pending:
                task.cancel()
            if pending:
                log.warning("handing back %d unfinished conversations", len(pending))
                await asyncio.gather(*pending, return_exceptions=True)

    async def _read(self) -> list[tuple[bytes, dict[bytes, bytes]]]:
        response: Any = await self.redis.xreadgroup(
            GROUP,
            self.name,
            {self.keys.inbox: ">"},
            count=self.concurrency * 2,
            block=self.block_ms,
        )
        if not response:
            return []
        return list(response[0][1])

    async def _accept(
        self, entries: Sequence[tuple[bytes | str, dict[bytes, bytes] | None]]
    ) -> None:
        """Put a batch of read entries on their conversations' backlogs (one round trip)."""
        conversations: dict[str, None] = {}  # ordered, without repeats
        async with self.redis.pipeline(transaction=False) as pipe:
            for entry_id, fields in entries:
                entry = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
                event = self._readable(entry, fields)
                if event is None:
                    pipe.xack(self.keys.inbox, GROUP, entry)
                    continue
                queued_at = float((fields or {}).get(b"queued_at", b"0") or 0)
                if queued_at:
                    metrics.QUEUE_LAG.observe(max(0.0, time.time() - queued_at))
                conversation = event.conversation.id
                backlog = self.keys.backlog(conversation)
                pipe.zadd(backlog, {backlog_member(entry): 0}, nx=True)
                pipe.pexpire(backlog, self.backlog_ttl_ms)
                self._read_events[entry] = event
                conversations[conversation] = None
            await pipe.execute()
        while len(self._read_events) > READ_CACHE:
            self._read_events.popitem(last=False)
        for conversation in conversations:
            self._spawn(conversation)

    @staticmethod
    def _readable(entry: str, fields: dict[bytes, bytes] | None) -> Inbound | None:
        if not fields:  # trimmed away: nothing to do
            return None
        try:
            return decode(fields[b"event"])
        except Exception:
            log.exception("dropping unreadable inbox entry %s", entry)
            return None

    def _spawn(self, conversation: str) -> None:
        task = asyncio.create_task(self._drain_conversation(conversation))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drain_conversation(self, conversation: str) -> None:
        backlog = self.keys.backlog(conversation)
        async with self._slots, self.locks.held(conversation) as lease:
            if lease is None:
                return  # its holder drains the backlog, our entry included
            members: list[bytes] = await self.redis.zrange(backlog, 0, 0)  # type: ignore[assignment]
            while members and not lease.lost:
                entry = entry_of(members[0])
                if not await self._process(entry, lease):
                    return
                # Acknowledge only now that its effects are stored, and look for the next.
                async with self.redis.pipeline(transaction=False) as pipe:
                    pipe.xack(self.keys.inbox, GROUP, entry)
                    pipe.zrem(backlog, members[0])
                    pipe.zrange(backlog, 0, 0)
                    *_, members = await pipe.execute()
        # An entry may have arrived between our last look and the release.
        if await self.redis.zcard(backlog) and not self._stopping.is_set():
            self._spawn(conversation)

    async def _process(self, entry: str, lease: Lease) -> bool:
        """Handle one entry; False if the lock was lost (the entry stays unacknowledged)."""
        event = self._read_events.pop(entry, None)
        if event is None:  # read by another worker, or before a restart
            found = await self.redis.xrange(self.keys.inbox, min=entry, max=entry)
            if not found:
                return True  # trimmed long ago
            fields: dict[bytes, bytes] = found[0][1]  # type: ignore[assignment]
            event = decode(fields[b"event"])
        try:
            await self.handle(entry, event, lease)
        except LockLost:
            log.warning("lock of %s lost while handling %s", lease.conversation_id, entry)
            return False
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("handling %s failed", entry)
            if self.on_error is not None:
                await self.on_error(entry, event)
        return True

    async def _reclaim_forever(self) -> None:
        interval = max(0.05, self.reclaim_idle / 2)
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await self._stopping.wait()
            if self._stopping.is_set():
                return
            try:
                await self.reclaim()
                await self._sample_queue()
            except (ConnectionError, OSError, aioredis.ConnectionError):
                log.warning("reclaim pass failed; will retry")

    async def reclaim(self) -> int:
        """Take over entries that another (dead or stuck) consumer left idle."""
        start = "0-0"
        claimed = 0
        while True:
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
                await self._accept(entries)
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
