"""One run at a time per conversation: a leased Redis lock with a fencing token.

The lease is renewed while the holder works. Every write of conversation state checks, in
the same Lua script, that the writer still holds the lock, so a worker that stalled past its
lease cannot overwrite what a newer holder wrote. While Redis is away the renewal keeps
trying until the lease would have run out; a lock that could not be released then is
released on this process's next try for that conversation, so no outage leaves it stuck.

Taking the lock is one round trip that also puts newly read entries on the conversation's
backlog and reads what the holder needs first (the backlog's oldest entry and the stored
session); releasing it says how many entries are still waiting. Only the holder writes the
session, so its lease keeps the stored copy and a second read is never needed.

The acknowledgement of an entry whose session is stored waits on the lease for the holder's
next write (the next session save, a renewal or the release) and rides in its round trip, a
non-transactional pipeline: the inbox and the conversation are different slots in a cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Iterator, Sequence

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline

from bot.ops.health import REDIS_DOWN, redis_away
from bot.runtime.keys import Keys
from bot.runtime.reclaimer import GROUP

log = logging.getLogger(__name__)

# KEYS: lock, fence, backlog, session. ARGV: owner, lease ms, ttl ms (fence and backlog), then
# backlog members to add. Returns false, or {token, oldest backlog member, session, the
# members this call added (none was on the backlog before)...}.
_ACQUIRE = """
local added = {}
if #ARGV > 3 then
  for i = 4, #ARGV do
    if redis.call('zadd', KEYS[3], 'NX', 0, ARGV[i]) == 1 then
      added[#added + 1] = ARGV[i]
    end
  end
  redis.call('pexpire', KEYS[3], ARGV[3])
end
if not redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return false
end
local token = redis.call('incr', KEYS[2])
redis.call('pexpire', KEYS[2], ARGV[3])
redis.call('set', KEYS[1], ARGV[1] .. ':' .. token, 'PX', ARGV[2])
local head = redis.call('zrange', KEYS[3], 0, 0)[1] or false
return {token, head, redis.call('get', KEYS[4]), unpack(added)}
"""

_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""

# KEYS: lock, backlog. Returns how many entries wait on the backlog.
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
end
return redis.call('zcard', KEYS[2])
"""


class LockLost(Exception):
    """The lease ran out and another worker may hold the conversation now."""


class Lease:
    """A held conversation lock: `value` proves it, `token` orders holders.

    It also carries what the holder knows of its conversation: the session as last stored
    (raw JSON, None if there is none) and the backlog's oldest member as last seen; the
    entries it put on the backlog on their first delivery and has not tried yet (no earlier
    attempt can have left anything behind for them); writes that may wait for its next
    session save, so that they share its round trip (key → value, ttl in ms); and the handled
    entries whose sessions are stored, acknowledged with its next write (`riding`)."""

    def __init__(
        self,
        conversation_id: str,
        value: str,
        token: int,
        *,
        session: bytes | None = None,
        head: bytes | None = None,
    ) -> None:
        self.conversation_id = conversation_id
        self.value = value
        self.token = token
        self.session = session
        self.head = head
        self.done: bytes | None = None  # the backlog member the last session save took off
        self.remaining = 0  # entries left on the backlog at release
        self.added: set[str] = set()  # backlog members its acquisition put there
        self.untried: set[str] = set()
        self.records: dict[str, tuple[str, int]] = {}
        self.acks: list[str] = []
        self._lost = asyncio.Event()

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    @lost.setter
    def lost(self, value: bool) -> None:
        if value:
            self._lost.set()
        else:
            self._lost.clear()

    async def wait_lost(self) -> None:
        await self._lost.wait()

    @contextlib.contextmanager
    def riding(self, pipe: Pipeline, inbox: str) -> Iterator[None]:
        """Queue the waiting acknowledgements into `pipe`, whose round trip the block makes;
        they wait for the next one if it fails (acknowledging twice is harmless)."""
        acks, self.acks = self.acks, []
        if acks:
            pipe.xack(inbox, GROUP, *acks)
        try:
            yield
        except BaseException:
            self.acks[:0] = acks
            raise


class ConversationLocks:
    def __init__(
        self,
        redis: aioredis.Redis,
        keys: Keys,
        *,
        lease: float,
        ttl: float,
    ) -> None:
        """`ttl`: how long a conversation's fence and backlog outlive their last write."""
        self.redis = redis
        self.keys = keys
        self.lease_ms = int(lease * 1000)
        self.ttl_ms = int(ttl * 1000)
        self.owner = uuid.uuid4().hex[:12]
        self._acquire = redis.register_script(_ACQUIRE)
        self._renew = redis.register_script(_RENEW)
        self._release = redis.register_script(_RELEASE)
        # Leases whose release failed (Redis was away), released before the next try.
        self._unreleased: dict[str, Lease] = {}

    async def try_acquire(self, conversation_id: str, add: Sequence[str] = ()) -> Lease | None:
        """Put `add` (backlog members) on the backlog, then take the lock if it is free."""
        if (stale := self._unreleased.pop(conversation_id, None)) is not None:
            try:
                await self.release(stale)
            except BaseException:
                self._unreleased[conversation_id] = stale
                raise
        keys = [
            self.keys.lock(conversation_id),
            self.keys.fence(conversation_id),
            self.keys.backlog(conversation_id),
            self.keys.session(conversation_id),
        ]
        args: list[str | int] = [self.owner, self.lease_ms, self.ttl_ms, *add]
        taken = await self._acquire(keys=keys, args=args)
        if taken is None:
            return None
        token, head, session = int(taken[0]), taken[1] or None, taken[2] or None
        lease = Lease(conversation_id, f"{self.owner}:{token}", token, session=session, head=head)
        lease.added = {_text(member) for member in taken[3:]}
        return lease

    async def release(self, lease: Lease) -> int:
        """Let go of the lock (with the waiting acknowledgements); returns how many entries
        wait on its backlog."""
        keys = [self.keys.lock(lease.conversation_id), self.keys.backlog(lease.conversation_id)]
        if not lease.acks:
            remaining = await self._release(keys=keys, args=[lease.value])
        else:
            async with self.redis.pipeline(transaction=False) as pipe:
                with lease.riding(pipe, self.keys.inbox):
                    # EVAL: a registered script in a pipeline costs a SCRIPT EXISTS first.
                    pipe.eval(_RELEASE, len(keys), *keys, lease.value)
                    *_, remaining = await pipe.execute()
        lease.remaining = int(remaining)
        return lease.remaining

    @contextlib.asynccontextmanager
    async def held(
        self, conversation_id: str, add: Sequence[str] = ()
    ) -> AsyncIterator[Lease | None]:
        """Hold the lock (renewing it) for the block; yields None when someone else holds it.
        After the block, the lease's `remaining` says how many entries wait on the backlog."""
        lease = await self.try_acquire(conversation_id, add)
        if lease is None:
            yield None
            return
        try:
            async with self.kept(lease):
                yield lease
        finally:
            await self.let_go(lease)

    @contextlib.asynccontextmanager
    async def kept(self, lease: Lease) -> AsyncIterator[None]:
        """Renew the lease while the block runs (`lease.lost` says if that failed)."""
        renewer = asyncio.create_task(self._keep(lease))
        try:
            yield
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer

    async def let_go(self, lease: Lease) -> bool:
        """Release, never failing the caller (the lease runs out anyway); False if Redis did
        not take it (then it is tried again before this process's next try for the
        conversation, acknowledgements included)."""
        try:
            await self.release(lease)
        except Exception as exc:
            if redis_away(exc):
                self._unreleased[lease.conversation_id] = lease
            return False
        return True

    async def _keep(self, lease: Lease) -> None:
        key = self.keys.lock(lease.conversation_id)
        renewed = time.monotonic()
        while True:
            await asyncio.sleep(self.lease_ms / 3000)
            try:
                kept = await self._renew_riding(lease, key)
            except REDIS_DOWN:
                if time.monotonic() - renewed < self.lease_ms / 1000:
                    continue  # Redis may be back before the lease runs out
                kept = False
            if not kept:
                lease.lost = True
                log.warning("lost the lock of %s", lease.conversation_id)
                return
            renewed = time.monotonic()

    async def _renew_riding(self, lease: Lease, key: str) -> object:
        """Renew; waiting acknowledgements ride along (a long run must not leave the entry
        before it idle long enough to be reclaimed)."""
        if not lease.acks:
            return await self._renew(keys=[key], args=[lease.value, self.lease_ms])
        async with self.redis.pipeline(transaction=False) as pipe:
            with lease.riding(pipe, self.keys.inbox):
                pipe.eval(_RENEW, 1, key, lease.value, self.lease_ms)
                *_, kept = await pipe.execute()
        return kept


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def while_held(lease: Lease, work: Awaitable[None]) -> None:
    """Await `work`, stopped with LockLost as soon as the lease is found lost: a new holder
    handles the entry again, and a stale run must not answer before it."""
    task = asyncio.ensure_future(work)
    lost = asyncio.ensure_future(lease.wait_lost())
    try:
        await asyncio.wait((task, lost), return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done():
            task.cancel()
        lost.cancel()
        await asyncio.gather(task, lost, return_exceptions=True)
    if task.cancelled():
        raise LockLost(lease.conversation_id)
    task.result()
