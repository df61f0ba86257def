"""Per-conversation session state in Redis, written only by the lock holder.

    idle ──message──▶ running ──▶ awaiting_answer ──answer──▶ running ──▶ idle
                                 └▶ awaiting_approval ──decision──┘

(the moves, as a table, are `bot/conversation/states.py`'s)

`state` holds the RunState of the run in progress or suspended, or of the last finished run
(its messages are the conversation's short-term history).

Storing a session whose `last_entry` moved on also takes that entry off the conversation's
backlog and reads the next one, in the same script: the worker needs no round trip of its
own between two entries. When that entry is the one its worker is handling and none waits,
the script also lets go of the lock, so the holder's last round trip is its last save.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal

import redis.asyncio as aioredis
from pydantic import BaseModel
from redis.asyncio.client import Pipeline

from agent.state import RunState
from bot.runtime.holding import PendingWrites
from bot.runtime.keys import Keys, backlog_member
from bot.runtime.locks import TELL_NEXT, Holding, LockLost

Status = Literal["idle", "running", "awaiting_answer", "awaiting_approval"]
Queue = Callable[[Pipeline], object]  # adds commands to a pipeline

# KEYS: lock, session, backlog, untried, attempts. ARGV: lease value, session, ttl ms, backlog
# member done ('' if none), '1' to let go of the lock if no entry waits. Returns false if the
# lease is lost, else {1, the backlog's oldest member, whether it was untried, whether it let
# go of the lock, tries begun (counted only when the member done left: the next one begins;
# see bot/runtime/locks.py)}.
_WRITE = (
    TELL_NEXT
    + """
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return false
end
redis.call('set', KEYS[2], ARGV[2], 'PX', ARGV[3])
local left = 0
if ARGV[4] ~= '' then
  left = redis.call('zrem', KEYS[3], ARGV[4])
  redis.call('hdel', KEYS[5], ARGV[4])
end
local head = redis.call('zrange', KEYS[3], 0, 0)[1]
if head and left == 1 then
  local _, untried, tries = tell(head, 4, 5)
  return {1, head, untried, 0, tries}
end
if head then
  return {1, head, redis.call('srem', KEYS[4], head), 0, 0}
end
if ARGV[5] == '1' then
  redis.call('del', KEYS[1])
  return {1, false, 0, 1, 0}
end
return {1, false, 0, 0, 0}
"""
)


class Resolution(BaseModel):
    """How an inbox entry resolved a pending decision, kept so a replay resumes the same way."""

    entry_id: str
    answer: str | None = None
    approved: bool | None = None
    reason: str | None = None
    standing: bool | None = None  # True: approved for good ("Always for this tool")


class Session(BaseModel):
    status: Status = "idle"
    state: RunState | None = None
    decision_id: str | None = None  # the pending question or approval
    resolving: Resolution | None = None
    last_entry: str | None = None  # newest inbox entry whose effects are stored
    # A bare mention in a shared thread: its replies are for Parley before any run.
    following: bool = False
    stopped_by: str | None = None  # the stop request (an inbox entry) that ended the last run
    updated_at: float = 0.0

    def done_with(self, entry_id: str) -> bool:
        return self.last_entry is not None and entry_order(entry_id) <= entry_order(self.last_entry)


def entry_order(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


class SessionStore:
    def __init__(self, redis: aioredis.Redis, keys: Keys, *, ttl: float) -> None:
        self.redis = redis
        self.keys = keys
        self.ttl_ms = int(ttl * 1000)
        self._write = redis.register_script(_WRITE)

    async def load(self, conversation_id: str, holding: Holding | None = None) -> Session:
        """The stored session; a holding of the conversation already has it (no round trip)."""
        raw: bytes | str | None
        if holding is not None and holding.conversation_id == conversation_id:
            raw = holding.stored
        else:
            raw = await self.redis.get(self.keys.session(conversation_id))
        return Session.model_validate_json(raw) if raw else Session()

    async def save(
        self,
        holding: Holding,
        session: Session,
        writes: PendingWrites,
        also: Queue | None = None,
    ) -> None:
        """Store the session if `holding` still holds the conversation; else raise LockLost.

        Its `last_entry` leaves the backlog, and the holding's cursor learns the backlog's
        next entry; if that was the cursor's `let_go_after` and no entry waits, the lock is
        let go of (`holding.released`). The records in `writes` and `also`'s writes go first,
        in the same round trip (they are not fenced), and its acknowledgements ride along."""
        session.updated_at = time.time()
        conversation, cursor = holding.conversation_id, holding.cursor
        keys = [
            self.keys.lock(conversation),
            self.keys.session(conversation),
            self.keys.backlog(conversation),
            self.keys.untried(conversation),
            self.keys.attempts(conversation),
        ]
        raw = session.model_dump_json()
        done = backlog_member(session.last_entry) if session.last_entry else ""
        let_go = bool(done) and done.encode() == cursor.let_go_after
        args: list[str | int] = [holding.fence.value, raw, self.ttl_ms, done, int(let_go)]
        holding.letting_go = let_go  # the renewal may find the lock gone meanwhile
        try:
            written = await self._write_with(writes, keys, args, also)
        finally:
            holding.letting_go = False
        if not written:
            raise LockLost(conversation)
        holding.stored = raw.encode()
        cursor.done = done.encode() or None
        cursor.next_up(written[1] or None, written[2], int(written[4]))
        holding.released = bool(written[3])
        if holding.released:
            cursor.remaining = 0

    async def _write_with(
        self, writes: PendingWrites, keys: list[str], args: list[str | int], also: Queue | None
    ) -> Any:
        if not (writes.records or writes.acks or also is not None):
            return await self._write(keys=keys, args=args)
        records = writes.take_records()
        async with self.redis.pipeline(transaction=False) as pipe:
            for key, (value, ttl_ms) in records.items():
                pipe.set(key, value, px=ttl_ms)
            if also is not None:
                also(pipe)
            with writes.riding(pipe, self.keys.inbox):  # entries stored by earlier saves
                # EVAL: a registered script in a pipeline costs a SCRIPT EXISTS first.
                pipe.eval(_WRITE, len(keys), *keys, *args)
                *_, written = await pipe.execute()
        return written
