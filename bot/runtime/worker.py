"""Workers: read the inbox stream in a consumer group and handle each conversation in order.

Every entry read is first put on its conversation's backlog (a sorted set ordered by entry
id). Whoever holds the conversation's lock drains that backlog oldest first, so entries of
one conversation are handled one at a time and in order, whichever worker read them. An
entry is acknowledged only after its effects are stored; entries left by a dead worker are
claimed again (XAUTOCLAIM) once idle long enough, and put back on their backlog.

Faults: while Redis is away every loop backs off and tries again, and conversations cut off
mid-way are taken up again once it is back (their entries stay pending until acknowledged).
An entry that cannot be decoded goes straight to the dead-letter stream; one whose handling
raises is tried again, up to `max_attempts` times counted in Redis, then dead-lettered and
the user told. A worker that stops cleanly with nothing pending leaves the consumer group,
and the reclaimer removes consumers that left long ago with nothing pending.
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
from bot.ops.health import REDIS_DOWN, Health, pause, redis_away
from bot.runtime.inbox import decode
from bot.runtime.keys import Keys
from bot.runtime.locks import ConversationLocks, Lease, LockLost

log = logging.getLogger(__name__)

GROUP = "workers"
READ_CACHE = 10_000  # read events kept for their handling; the rest are read again
DEAD_LETTER_MAXLEN = 10_000  # approximate; the oldest dead letters go first
ERROR_CHARS = 500  # of an error's text kept with its dead letter
RETRY_DELAY = 0.5  # seconds before a failed entry's second try; doubles, up to RETRY_DELAY_MAX
RETRY_DELAY_MAX = 5.0
FORGET_AFTER = 10  # reclaim intervals a consumer with nothing pending may idle before removal
Handler = Callable[[str, Inbound, Lease], Awaitable[None]]
OnError = Callable[[str, Inbound], Awaitable[None]]
Processed = Literal["done", "retry", "lost"]

# Remove a consumer from the group, but only while it has nothing pending (DELCONSUMER would
# drop its pending entries, and nobody would handle them).
_LEAVE = """
if #redis.call('xpending', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2]) > 0 then
  return 0
end
redis.call('xgroup', 'delconsumer', KEYS[1], ARGV[1], ARGV[2])
return 1
"""


def backlog_member(entry_id: str) -> str:
    """Zero-padded so that lexical order is entry order."""
    ms, _, seq = entry_id.partition("-")
    return f"{int(ms):015d}-{int(seq or 0):010d}"


def _queued_at(fields: dict[bytes, bytes]) -> float:
    try:
        return float(fields.get(b"queued_at") or 0)
    except ValueError:
        return 0.0  # only the lag metric needs it


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
        max_attempts: int = 3,
        health: Health | None = None,
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
        self.max_attempts = max_attempts
        self.forget_idle = FORGET_AFTER * reclaim_idle
        health = health or Health()
        self.reading = health.register("worker", every=max(30.0, 10 * block))
        self.reclaiming = health.register("reclaimer", every=max(0.05, reclaim_idle / 2) + 30.0)
        self._health = health
        self._leave = redis.register_script(_LEAVE)
        # Conversations cut off by an outage or a lost lock, taken up again after a good read.
        self._stalled: set[str] = set()
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
        log.info("worker %s consuming %s", self.name, self.keys.inbox)
        reclaimer = asyncio.create_task(self._reclaim_forever())
        self._health.watch(self.reclaiming, reclaimer)
        grouped = False
        try:
            while not self._stopping.is_set():
                if len(self._tasks) >= self.concurrency * 4:
                    self.reading.alive()
                    await asyncio.sleep(0.005)
                    continue
                try:
                    if not grouped:
                        await self.ensure_group()
                        grouped = True
                    entries = await self._read()
                    if self.reading.beat():  # back after an outage
                        await self._accept_own_pending()
                    self._take_up_stalled()
                    if entries:
                        await self._accept(entries)
                except Exception as exc:
                    await pause(self._stopping, self.reading.failed(exc))
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
        response = await self._read_group(">")
        if not response:
            return []
        return list(response[0][1])

    async def _read_group(self, start: str) -> Any:
        try:
            return await self.redis.xreadgroup(
                GROUP,
                self.name,
                {self.keys.inbox: start},
                count=self.concurrency * 2,
                block=self.block_ms if start == ">" else None,
            )
        except ResponseError as exc:
            if not _group_gone(exc):
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
            start = last.decode() if isinstance(last, bytes) else last

    def _take_up_stalled(self) -> None:
        stalled, self._stalled = self._stalled, set()
        for conversation in stalled:
            self._spawn(conversation)

    async def _accept(
        self, entries: Sequence[tuple[bytes | str, dict[bytes, bytes] | None]]
    ) -> None:
        """Put a batch of read entries on their conversations' backlogs (one round trip)."""
        conversations: dict[str, None] = {}  # ordered, without repeats
        quarantined: list[str] = []
        async with self.redis.pipeline(transaction=False) as pipe:
            for entry_id, fields in entries:
                entry = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
                if not fields:  # trimmed away: nothing to do
                    pipe.xack(self.keys.inbox, GROUP, entry)
                    continue
                try:
                    event, conversation = self._decode(fields)
                except Exception as exc:
                    self._dead_letter(pipe, entry, fields, "undecodable", exc, attempts=0)
                    pipe.xack(self.keys.inbox, GROUP, entry)
                    quarantined.append(entry)
                    continue
                if queued_at := _queued_at(fields):
                    metrics.QUEUE_LAG.observe(max(0.0, time.time() - queued_at))
                backlog = self.keys.backlog(conversation)
                pipe.zadd(backlog, {backlog_member(entry): 0}, nx=True)
                pipe.pexpire(backlog, self.backlog_ttl_ms)
                self._read_events[entry] = event
                conversations[conversation] = None
            await pipe.execute()
        for entry in quarantined:
            self._dead_lettered(entry, "undecodable")
        while len(self._read_events) > READ_CACHE:
            self._read_events.popitem(last=False)
        for conversation in conversations:
            self._spawn(conversation)

    @staticmethod
    def _decode(fields: dict[bytes, bytes]) -> tuple[Inbound, str]:
        """The event and its conversation id; raises for anything a worker could not handle."""
        event = decode(fields[b"event"])
        conversation = event.conversation.id
        if not isinstance(event.event_id, str) or not isinstance(event.actor.user_id, str):
            raise TypeError("event and user ids must be strings")
        return event, conversation

    def _dead_letter(
        self,
        pipe: Any,
        entry: str,
        fields: dict[bytes, bytes] | None,
        reason: str,
        exc: BaseException,
        *,
        attempts: int,
    ) -> None:
        """Queue, on `pipe`, the entry's move to the dead-letter stream (with what went wrong)."""
        letter: dict[Any, Any] = {
            "entry": entry,
            "reason": reason,
            "error": type(exc).__name__,
            "message": str(exc)[:ERROR_CHARS],
            "attempts": attempts,
            "event": (fields or {}).get(b"event", b""),
            "failed_at": f"{time.time():.3f}",
        }
        pipe.xadd(self.keys.dead_letters, letter, maxlen=DEAD_LETTER_MAXLEN, approximate=True)

    @staticmethod
    def _dead_lettered(entry: str, reason: str) -> None:
        metrics.DEAD_LETTERS.labels(reason).inc()
        log.warning("inbox entry %s moved to the dead-letter stream (%s)", entry, reason)

    def _spawn(self, conversation: str) -> None:
        task = asyncio.create_task(self._drain_conversation(conversation))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drain_conversation(self, conversation: str) -> None:
        try:
            await self._drain(conversation)
        except Exception as exc:
            if not redis_away(exc):
                log.exception("draining %s failed; the reclaimer will take it up", conversation)
                return
            # Its entries stay pending and on the backlog: taken up again after a good read
            # (the reading loop says when Redis is away; one line per conversation is noise).
            self._stalled.add(conversation)
            log.debug("%s cut off (%s); will take it up again", conversation, type(exc).__name__)

    async def _drain(self, conversation: str) -> None:
        backlog = self.keys.backlog(conversation)
        async with self._slots, self.locks.held(conversation) as lease:
            if lease is None:
                return  # its holder drains the backlog, our entry included
            members: list[bytes] = await self.redis.zrange(backlog, 0, 0)  # type: ignore[assignment]
            while members and not lease.lost:
                entry = entry_of(members[0])
                processed = await self._process(entry, lease)
                if processed == "lost":
                    lease.lost = True
                    break
                if processed == "retry":
                    if self._stopping.is_set():
                        return  # it stays pending for whoever runs next
                    continue
                # Acknowledge only now that its effects are stored, and look for the next.
                async with self.redis.pipeline(transaction=False) as pipe:
                    pipe.xack(self.keys.inbox, GROUP, entry)
                    pipe.zrem(backlog, members[0])
                    pipe.zrange(backlog, 0, 0)
                    *_, members = await pipe.execute()
            if lease.lost:
                self._stalled.add(conversation)  # whoever holds it now drains; else we do
                return
        # An entry may have arrived between our last look and the release.
        if await self.redis.zcard(backlog) and not self._stopping.is_set():
            self._spawn(conversation)

    async def _process(self, entry: str, lease: Lease) -> Processed:
        """Handle one entry: done (acknowledge it), retry (keep it), or lost (the lock)."""
        event = self._read_events.pop(entry, None)
        fields: dict[bytes, bytes] | None = None
        if event is None:  # read by another worker, or before a restart
            found = await self.redis.xrange(self.keys.inbox, min=entry, max=entry)
            if not found:
                return "done"  # trimmed long ago
            fields = found[0][1]  # type: ignore[assignment]
            try:
                event, _ = self._decode(fields or {})
            except Exception as exc:
                await self._quarantine(entry, fields, "undecodable", exc, lease, attempts=0)
                return "done"
        try:
            await self._while_held(entry, event, lease)
        except LockLost:
            log.warning("lock of %s lost while handling %s", lease.conversation_id, entry)
            self._read_events[entry] = event
            return "lost"
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if redis_away(exc):  # not the entry's fault: it is tried again once Redis is back
                self._read_events[entry] = event
                raise
            return await self._failed(entry, event, fields, exc, lease)
        return "done"

    async def _while_held(self, entry: str, event: Inbound, lease: Lease) -> None:
        """Handle the entry, stopped with LockLost as soon as the lease is found lost: a new
        holder handles it again, and a stale run must not answer before it."""
        work = asyncio.ensure_future(self.handle(entry, event, lease))
        lost = asyncio.ensure_future(lease.wait_lost())
        try:
            await asyncio.wait((work, lost), return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not work.done():
                work.cancel()
            lost.cancel()
            await asyncio.gather(work, lost, return_exceptions=True)
        if work.cancelled():
            raise LockLost(lease.conversation_id)
        work.result()

    async def _failed(
        self,
        entry: str,
        event: Inbound,
        fields: dict[bytes, bytes] | None,
        exc: Exception,
        lease: Lease,
    ) -> Processed:
        """Count a failed try in Redis (so restarts and other workers see it); retry or give up."""
        key = self.keys.attempts(lease.conversation_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hincrby(key, entry, 1)
            pipe.pexpire(key, self.backlog_ttl_ms)
            attempts, _ = await pipe.execute()
        error = type(exc).__name__
        log.debug("handling %s failed", entry, exc_info=exc)
        if attempts < self.max_attempts:
            log.warning(
                "handling %s failed (%s), try %d of %d", entry, error, attempts, self.max_attempts
            )
            self._read_events[entry] = event
            await pause(self._stopping, min(RETRY_DELAY * 2 ** (attempts - 1), RETRY_DELAY_MAX))
            return "retry"
        if fields is None:
            found = await self.redis.xrange(self.keys.inbox, min=entry, max=entry)
            fields = found[0][1] if found else {}  # type: ignore[assignment]
        await self._quarantine(entry, fields, "failed", exc, lease, attempts=attempts)
        if self.on_error is not None:
            try:
                await self.on_error(entry, event)
            except Exception:
                log.exception("could not tell the user about %s", entry)
        return "done"

    async def _quarantine(
        self,
        entry: str,
        fields: dict[bytes, bytes] | None,
        reason: str,
        exc: BaseException,
        lease: Lease,
        *,
        attempts: int,
    ) -> None:
        """Dead-letter an entry met while draining (the caller acknowledges it)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            self._dead_letter(pipe, entry, fields, reason, exc, attempts=attempts)
            pipe.hdel(self.keys.attempts(lease.conversation_id), entry)
            await pipe.execute()
        self._dead_lettered(entry, reason)

    async def _reclaim_forever(self) -> None:
        interval = max(0.05, self.reclaim_idle / 2)
        wait = interval
        while not self._stopping.is_set():
            await pause(self._stopping, wait)
            if self._stopping.is_set():
                return
            try:
                await self.reclaim()
                await self.forget_departed()
                await self._sample_queue()
            except ResponseError as exc:
                if not _group_gone(exc):
                    wait = min(interval, self.reclaiming.failed(exc))
                # else Redis lost its data: the reading loop creates the group again, and says so
            except Exception as exc:
                wait = min(interval, self.reclaiming.failed(exc))
            else:
                self.reclaiming.beat()
                wait = interval

    async def reclaim(self) -> int:
        """Take over entries that another (dead or stuck) consumer left idle."""
        start = "0-0"
        claimed = 0
        for _ in range(1000):  # pages of 100: the rest waits for the next pass
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

    async def forget_departed(self) -> int:
        """Remove consumers with nothing pending that have not read for a long time."""
        removed = 0
        consumers: list[dict[Any, Any]] = await self.redis.xinfo_consumers(self.keys.inbox, GROUP)
        for consumer in consumers:
            raw = consumer.get("name")
            name = raw.decode() if isinstance(raw, bytes) else str(raw)
            idle = int(consumer.get("idle") or 0) / 1000
            if name == self.name or consumer.get("pending") or idle < self.forget_idle:
                continue
            if await self._leave(keys=[self.keys.inbox], args=[GROUP, name]):
                removed += 1
                log.info("removed consumer %s, idle for %.0f s, from the group", name, idle)
            if removed >= 100:
                break
        return removed

    async def leave(self) -> None:
        """On a clean stop: leave the group unless entries are still pending for this worker."""
        try:
            if await self._leave(keys=[self.keys.inbox], args=[GROUP, self.name]):
                log.info("worker %s left the consumer group", self.name)
            else:
                log.info("worker %s leaves pending entries for the others to claim", self.name)
        except REDIS_DOWN:
            log.warning("worker %s could not leave the consumer group: Redis is away", self.name)


def _group_gone(exc: ResponseError) -> bool:
    """The consumer group (or the whole stream) is missing: Redis came back without its data."""
    text = str(exc)
    return "NOGROUP" in text or "no such key" in text
