"""One run at a time per conversation: a leased Redis lock with a fencing token.

The lease is renewed while the holder works. Every write of conversation state checks, in
the same Lua script, that the writer still holds the lock, so a worker that stalled past its
lease cannot overwrite what a newer holder wrote. While Redis is away the renewal keeps
trying until the lease would have run out; a lock that could not be released then is
released on this process's next try for that conversation, so no outage leaves it stuck.

Taking the lock is one round trip that also puts newly read entries on the conversation's
backlog and reads what the holder needs first (the backlog's oldest entry and the stored
session). Only the holder writes the session, so its holding keeps the stored copy and a
second read is never needed. Usually the session save that stores the last waiting entry
lets go of the lock (`bot/runtime/sessions.py`); otherwise letting go is one round trip of
its own, which keeps the lock instead while entries wait and says which one is next, so a
holder drains what arrived as it finished without taking the lock again.

An entry put on the backlog on its first delivery (by whoever tried the lock) stays marked
untried until a holder is told it is next, so its handling need not look for what an earlier
attempt left; a holder that dies before trying it costs the next one only that look.
Telling a holder which entry is next also counts a try of it (`attempts`, a hash by backlog
member, emptied as entries leave the backlog), in the same script: a worker killed while
handling an entry (out of memory, say) has used up a try, so a poison entry is dead-lettered
after `max_attempts` instead of killing worker after worker.

The acknowledgement of an entry whose session is stored waits in the holding's pending
writes (`bot/runtime/holding.py`) for the holder's next write (the next session save, a
renewal or the release) and rides in its round trip, a non-transactional pipeline: the
inbox and the conversation are different slots in a cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Sequence

import redis.asyncio as aioredis

from bot.ops.health import REDIS_DOWN, redis_away
from bot.runtime.holding import Fence, Holding, LockLost, while_held
from bot.runtime.keys import Keys
from loops import Running, Stopped, pause, race

__all__ = ["ConversationLocks", "Holding", "LockLost", "while_held"]  # the holder's side too

log = logging.getLogger(__name__)

RENEW_GRACE = 5.0  # seconds a renewal cut short by the end of the block may take to end
ATTEMPTS_TTL_MS = 86_400_000  # a safety net: fields leave with their backlog members

# Telling the holder `head` is next: whether it was untried, and the tries of it begun (this
# one included). Needs KEYS[untried], KEYS[attempts] given by index.
TELL_NEXT = f"""
local function tell(head, untried, attempts)
  if not head then
    return false, 0, 0
  end
  local tries = redis.call('hincrby', KEYS[attempts], head, 1)
  redis.call('pexpire', KEYS[attempts], {ATTEMPTS_TTL_MS})
  return head, redis.call('srem', KEYS[untried], head), tries
end
"""

# KEYS: lock, fence, backlog, session, untried, attempts. ARGV: owner, lease ms, ttl ms
# (fence, backlog, untried), how many of the members that follow are on their first delivery,
# then backlog members to add (those first). Returns false, or {token, oldest member,
# whether it was untried, session, tries begun}.
_ACQUIRE = (
    TELL_NEXT
    + """
if #ARGV > 4 then
  local first = 4 + tonumber(ARGV[4])
  for i = 5, #ARGV do
    if redis.call('zadd', KEYS[3], 'NX', 0, ARGV[i]) == 1 and i <= first then
      redis.call('sadd', KEYS[5], ARGV[i])
    end
  end
  redis.call('pexpire', KEYS[3], ARGV[3])
  redis.call('pexpire', KEYS[5], ARGV[3])
end
if not redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return false
end
local token = redis.call('incr', KEYS[2])
redis.call('pexpire', KEYS[2], ARGV[3])
redis.call('set', KEYS[1], ARGV[1] .. ':' .. token, 'PX', ARGV[2])
local head, untried, tries = tell(redis.call('zrange', KEYS[3], 0, 0)[1], 5, 6)
return {token, head, untried, redis.call('get', KEYS[4]), tries}
"""
)

_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""

# KEYS: lock, backlog, untried, attempts. ARGV: lease value, '1' to keep the lock while
# entries wait, lease ms. Returns {1, oldest member, whether it was untried, tries begun} if
# it kept the lock, else {0, how many entries wait}.
_RELEASE = (
    TELL_NEXT
    + """
local ours = redis.call('get', KEYS[1]) == ARGV[1]
if ours and ARGV[2] == '1' then
  local head = redis.call('zrange', KEYS[2], 0, 0)[1]
  if head then
    redis.call('pexpire', KEYS[1], ARGV[3])
    local _, untried, tries = tell(head, 3, 4)
    return {1, head, untried, tries}
  end
end
if ours then
  redis.call('del', KEYS[1])
end
return {0, redis.call('zcard', KEYS[2])}
"""
)


# KEYS: backlog, untried, attempts. ARGV: the member to take off. Returns {oldest member,
# was untried, tries begun}.
_SKIP = (
    TELL_NEXT
    + """
redis.call('zrem', KEYS[1], ARGV[1])
redis.call('srem', KEYS[2], ARGV[1])
redis.call('hdel', KEYS[3], ARGV[1])
local head, untried, tries = tell(redis.call('zrange', KEYS[1], 0, 0)[1], 2, 3)
return {head, untried, tries}
"""
)


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
        self.renew_every = lease / 3  # seconds: two renewals may fail before the lease ends
        self.owner = uuid.uuid4().hex[:12]
        self._acquire = redis.register_script(_ACQUIRE)
        self._renew = redis.register_script(_RENEW)
        self._release = redis.register_script(_RELEASE)
        # Holdings whose release failed (Redis was away), released before the next try.
        self._unreleased: dict[str, Holding] = {}

    async def try_acquire(
        self, conversation_id: str, add: Sequence[str] = (), first: Sequence[str] = ()
    ) -> Holding | None:
        """Put `add` and `first` (backlog members; `first` on their first delivery) on the
        backlog, then take the lock if it is free."""
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
            self.keys.untried(conversation_id),
            self.keys.attempts(conversation_id),
        ]
        members = [*first, *add]
        args: list[str | int] = [self.owner, self.lease_ms, self.ttl_ms, len(first), *members]
        taken = await self._acquire(keys=keys, args=args)
        if taken is None:
            return None
        token, head, untried, session = int(taken[0]), taken[1] or None, taken[2], taken[3]
        fence = Fence(conversation_id=conversation_id, value=f"{self.owner}:{token}", token=token)
        holding = Holding(fence, session=session or None)
        holding.cursor.next_up(head, untried, int(taken[4]))
        return holding

    async def release(self, holding: Holding, *, keep_if_waiting: bool = False) -> int:
        """Let go of the lock (with the waiting acknowledgements); returns how many entries
        wait on its backlog. With `keep_if_waiting`, a lock with entries waiting is kept
        (renewed) instead: `cursor.kept` says so and `cursor.head` is the next entry."""
        conversation, cursor, writes = holding.conversation_id, holding.cursor, holding.writes
        keys = [
            self.keys.lock(conversation),
            self.keys.backlog(conversation),
            self.keys.untried(conversation),
            self.keys.attempts(conversation),
        ]
        args: list[str | int] = [holding.fence.value, int(keep_if_waiting), self.lease_ms]
        if not writes.acks:
            released = await self._release(keys=keys, args=args)
        else:
            async with self.redis.pipeline(transaction=False) as pipe:
                with writes.riding(pipe, self.keys.inbox):
                    # EVAL: a registered script in a pipeline costs a SCRIPT EXISTS first.
                    pipe.eval(_RELEASE, len(keys), *keys, *args)
                    *_, released = await pipe.execute()
        cursor.kept = bool(released[0])
        cursor.remaining = 1 if cursor.kept else int(released[1])  # kept: at least head waits
        if cursor.kept:
            cursor.next_up(released[1], released[2], int(released[3]))
        return cursor.remaining

    async def skip(self, holding: Holding, member: bytes) -> None:
        """Take a member off the backlog that no session save took off (nothing was stored
        for it), and note the next one; waiting acknowledgements ride along."""
        conversation = holding.conversation_id
        keys = [
            self.keys.backlog(conversation),
            self.keys.untried(conversation),
            self.keys.attempts(conversation),
        ]
        async with self.redis.pipeline(transaction=False) as pipe:
            with holding.writes.riding(pipe, self.keys.inbox):
                pipe.eval(_SKIP, len(keys), *keys, member)
                *_, found = await pipe.execute()
        holding.cursor.next_up(found[0] or None, found[1], int(found[2]))

    @contextlib.asynccontextmanager
    async def held(
        self, conversation_id: str, add: Sequence[str] = ()
    ) -> AsyncIterator[Holding | None]:
        """Hold the lock (renewing it) for the block; yields None when someone else holds it.
        After the block, the cursor's `remaining` says how many entries wait on the backlog."""
        holding = await self.try_acquire(conversation_id, add)
        if holding is None:
            yield None
            return
        try:
            async with self.kept(holding):
                yield holding
        finally:
            await self.let_go(holding)

    @contextlib.asynccontextmanager
    async def kept(self, holding: Holding) -> AsyncIterator[None]:
        """Renew the lease while the block runs (`holding.lost` says if that failed). The
        renewer stops with the block; if it failed for another reason than Redis being away,
        that failure is raised after the block (or logged, when the block raised its own)."""
        async with Running(grace=RENEW_GRACE) as renewing:
            renewer = renewing.start(self._keep(holding, renewing.stop))
            try:
                yield
            except BaseException:
                await renewing.close()
                if (failure := _failure(renewer)) is not None:
                    log.error(
                        "renewing the lock of %s failed", holding.conversation_id, exc_info=failure
                    )
                raise
        if (failure := _failure(renewer)) is not None:
            raise failure

    async def let_go(self, holding: Holding, *, keep_if_waiting: bool = False) -> bool:
        """Release, never failing the caller (the lease runs out anyway); False if Redis did
        not take it (then it is tried again before this process's next try for the
        conversation, acknowledgements included)."""
        try:
            await self.release(holding, keep_if_waiting=keep_if_waiting)
        except Exception as exc:
            if redis_away(exc):
                self._unreleased[holding.conversation_id] = holding
            return False
        return True

    async def _keep(self, holding: Holding, stop: asyncio.Event) -> None:
        key = self.keys.lock(holding.conversation_id)
        renewed = time.monotonic()
        while not stop.is_set():
            await pause(stop, self.renew_every)
            if holding.released or stop.is_set():
                return
            try:
                kept = await race(stop, self._renew_riding(holding, key))
            except Stopped:
                return
            except REDIS_DOWN:
                if time.monotonic() - renewed < self.lease_ms / 1000:
                    continue  # Redis may be back before the lease runs out
                kept = False
            if not kept and (holding.letting_go or holding.released):
                continue  # a session save let go of it (the holder is done)
            if not kept:
                holding.lose()
                log.warning("lost the lock of %s", holding.conversation_id)
                return
            renewed = time.monotonic()

    async def _renew_riding(self, holding: Holding, key: str) -> object:
        """Renew; waiting acknowledgements ride along (a long run must not leave the entry
        before it idle long enough to be reclaimed)."""
        value, writes = holding.fence.value, holding.writes
        if not writes.acks:
            return await self._renew(keys=[key], args=[value, self.lease_ms])
        async with self.redis.pipeline(transaction=False) as pipe:
            with writes.riding(pipe, self.keys.inbox):
                pipe.eval(_RENEW, 1, key, value, self.lease_ms)
                *_, kept = await pipe.execute()
        return kept


def _failure(renewer: asyncio.Task[None]) -> BaseException | None:
    """What the renewer ended with, looked at (so never "never retrieved")."""
    if not renewer.done() or renewer.cancelled():
        return None
    return renewer.exception()
