"""Due work: records due at a time, claimed under a lease, skipped and reported when unreadable.

Reminders, followed MCP tasks, prompt re-offers, parked replies and schedule slots are the same
thing underneath: a record in a key of its own and a member of a `due` sorted set scored by
when it is next due. Claiming moves due members to a `claimed` set scored by the end of their
lease, in one script; a worker that dies mid-way lets the lease run out and the member is due
again (from then), first. A record that is gone (done by another worker, expired) is let go
of; one that cannot be read is skipped, since it would fail every pass and hold up the others,
and reported once: dropped, or (`keep_unreadable`, for records a person made) left due where
it was for an operator to mend.

A feature keeps its own record type (a pydantic model or a dataclass, stored through the
record codec) and says what a claimed record means; this module only knows members, times
and leases.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, InitVar, dataclass, field
from typing import Generic, TypeVar

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline
from redis.commands.core import AsyncScript

from bot.ops import metrics
from bot.ops.health import Health, Heartbeat, repeat
from bot.runtime.codec import Codec, as_text
from bot.runtime.keys import Keys

log = logging.getLogger(__name__)

Record = TypeVar("Record")

# KEYS: due, claimed. ARGV: now, lease end, batch. A claim whose lease ran out (its worker
# died) is due again first; then the due members move to `claimed` until the lease ends.
# Returns each member claimed and the time it was due.
CLAIM = """
local stale = redis.call('zrangebyscore', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])
for _, id in ipairs(stale) do
  redis.call('zrem', KEYS[2], id)
  redis.call('zadd', KEYS[1], ARGV[1], id)
end
local due = redis.call('zrangebyscore', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, ARGV[3])
for i = 1, #due, 2 do
  redis.call('zrem', KEYS[1], due[i])
  redis.call('zadd', KEYS[2], ARGV[2], due[i])
end
return due
"""


@dataclass(frozen=True, kw_only=True)
class DueKeys:
    """Where one kind of due work lives: its two sets and each member's record key."""

    due: str
    claimed: str
    record: Callable[[str], str]


@dataclass(frozen=True)
class Claim(Generic[Record]):
    """A member claimed: its record, when it was due, and when the lease ends (the claim's
    mark in the `claimed` set, for a script that must act only under this very claim)."""

    member: str
    record: Record
    due: float
    lease_end: float


@dataclass(eq=False)
class DueWork(Generic[Record]):
    """One kind of due work (`kind` names it in logs and metrics), records of type `model`."""

    redis: aioredis.Redis
    keys: DueKeys
    model: type[Record]
    _: KW_ONLY
    kind: str
    lease: float
    batch: int = 50
    dropped: Callable[[str], Awaitable[None]] | None = None  # told of a member dropped unread
    keep_unreadable: bool = False  # leave an unreadable record due where it was, not drop it
    _claim: AsyncScript = field(init=False, repr=False)
    _codec: Codec[Record] = field(init=False, repr=False)
    _reported: set[str] = field(init=False, default_factory=set)  # kept unreadable, said once

    def __post_init__(self) -> None:
        self._claim = self.redis.register_script(CLAIM)
        self._codec = Codec(self.model)

    async def put(self, member: str, record: Record, at: float, ttl: float) -> None:
        """Store `record` (kept `ttl` seconds) and make it due at `at`."""
        async with self.redis.pipeline(transaction=True) as pipe:
            self.putting(pipe, member, record, at, ttl)
            await pipe.execute()

    def putting(self, pipe: Pipeline, member: str, record: Record, at: float, ttl: float) -> None:
        """`put`, queued on the caller's transaction (with its own writes)."""
        pipe.set(self.keys.record(member), self._codec.encode(record), px=int(ttl * 1000))
        pipe.zadd(self.keys.due, {member: at})

    async def claim(self, now: float) -> list[tuple[str, Record]]:
        """Claim what is due by `now` for a lease; the readable records claimed, in order."""
        return [(claim.member, claim.record) for claim in await self.claims(now)]

    async def claims(self, now: float) -> list[Claim[Record]]:
        """`claim`, with when each member was due and the end of its lease."""
        lease_end = now + self.lease
        found = await self._claim(
            keys=[self.keys.due, self.keys.claimed], args=[now, lease_end, self.batch]
        )
        if not found:
            return []
        members = [as_text(raw) for raw in found[::2]]
        raws = await self.redis.mget([self.keys.record(member) for member in members])
        claimed: list[Claim[Record]] = []
        for member, due, raw in zip(members, found[1::2], raws, strict=True):
            if raw is None:  # done meanwhile, or expired
                await self.redis.zrem(self.keys.claimed, member)
            elif (record := await self._read(member, raw, float(due))) is not None:
                claimed.append(Claim(member, record, float(due), lease_end))
        return claimed

    async def again(
        self, member: str, at: float, record: Record | None = None, ttl: float = 0.0
    ) -> None:
        """Let go of the claim; due again at `at` (with `record` stored anew, if given)."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.zrem(self.keys.claimed, member)
            if record is not None:
                self.putting(pipe, member, record, at, ttl)
            else:
                pipe.zadd(self.keys.due, {member: at})
            await pipe.execute()

    async def done(self, member: str) -> None:
        """Forget the member and its record, claimed or not."""
        async with self.redis.pipeline(transaction=True) as pipe:
            self.forgetting(pipe, member)
            await pipe.execute()

    def forgetting(self, pipe: Pipeline, member: str) -> None:
        """`done`, queued on the caller's transaction (with its own writes)."""
        pipe.zrem(self.keys.claimed, member)
        pipe.zrem(self.keys.due, member)
        pipe.delete(self.keys.record(member))

    async def every(self, most: int = 1000) -> list[tuple[str, Record]]:
        """The readable records, due or claimed (at most `most` of each)."""
        members: list[str] = []
        for name in (self.keys.due, self.keys.claimed):
            found: list[bytes] = await self.redis.zrange(name, 0, most - 1)  # type: ignore[assignment]
            members += [as_text(raw) for raw in found]
        if not members:
            return []
        raws = await self.redis.mget([self.keys.record(member) for member in members])
        return [
            (member, record)
            for member, raw in zip(members, raws, strict=True)
            if raw is not None and (record := await self._read(member, raw)) is not None
        ]

    async def count(self) -> int:
        return int(await self.redis.zcard(self.keys.due)) + int(
            await self.redis.zcard(self.keys.claimed)
        )

    async def _read(self, member: str, raw: bytes | str, due: float | None = None) -> Record | None:
        try:
            return self._codec.decode(raw)
        except ValueError as exc:  # pydantic's ValidationError is one
            await self.unreadable(member, due, exc)
            return None

    async def unreadable(self, member: str, due: float | None, exc: Exception) -> None:
        """Skip a member whose record cannot be read (or used): dropped, or (claimed, due at
        `due`) left due there (`keep_unreadable`); reported once."""
        if self.keep_unreadable:
            if due is not None:
                await self.again(member, due)
            if member in self._reported:
                return
            self._reported.add(member)
        log.error(
            "%s %s has an unreadable record (%s); %s",
            self.kind,
            member,
            _why(exc),
            "skipping it, left for an operator" if self.keep_unreadable else "dropping it",
        )
        metrics.DUE_UNREADABLE.labels(self.kind).inc()
        if self.keep_unreadable:
            return
        await self.done(member)
        if self.dropped is not None:
            await self.dropped(member)


def _why(exc: Exception) -> str:
    count = getattr(exc, "error_count", None)
    return f"{count()} errors" if callable(count) else type(exc).__name__


@dataclass(eq=False)
class DueLoop(Generic[Record]):
    """A feature made of due work: its records, and the loop that takes up what is due every
    `poll` seconds under a heartbeat named among the process's loops. The feature says only
    what differs (`due_work`: its keys, record type, names and lease) and its pass over what
    is due (`due_pass`)."""

    redis: aioredis.Redis
    keys: Keys
    _: KW_ONLY
    poll: float = 1.0
    health: InitVar[Health | None] = None
    work: DueWork[Record] = field(init=False, repr=False)
    heartbeat: Heartbeat = field(init=False, repr=False)
    loop: str = field(init=False, default="")

    def due_work(
        self,
        keys: DueKeys,
        model: type[Record],
        *,
        kind: str,
        loop: str,
        lease: float,
        health: Health | None,
        batch: int = 50,
        keep_unreadable: bool = False,
    ) -> None:
        self.work = DueWork(
            self.redis,
            keys,
            model,
            kind=kind,
            lease=lease,
            batch=batch,
            keep_unreadable=keep_unreadable,
        )
        self.loop = loop
        self.watched(health or Health())

    def watched(self, health: Health) -> Heartbeat:
        """The loop's heartbeat, shown with the process's other loops."""
        self.heartbeat = health.register(self.loop, every=self.poll + 30.0)
        return self.heartbeat

    async def run(self, stop: asyncio.Event) -> None:
        await repeat(stop, self.heartbeat, self.due_pass, self.poll)

    async def due_pass(self) -> object:
        """One pass over what is due now."""
        raise NotImplementedError
