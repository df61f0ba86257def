"""Per-conversation session state in Redis, written only by the lock holder.

    idle ──message──▶ running ──▶ awaiting_answer ──answer──▶ running ──▶ idle
                                 └▶ awaiting_approval ──decision──┘

`state` holds the RunState of the run in progress or suspended, or of the last finished run
(its messages are the conversation's short-term history).
"""

from __future__ import annotations

import time
from typing import Literal

import redis.asyncio as aioredis
from pydantic import BaseModel

from agent.state import RunState
from bot.runtime.keys import Keys
from bot.runtime.locks import Lease, LockLost

Status = Literal["idle", "running", "awaiting_answer", "awaiting_approval"]

_WRITE = """
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('set', KEYS[2], ARGV[2], 'PX', ARGV[3])
return 1
"""


class Resolution(BaseModel):
    """How an inbox entry resolved a pending decision, kept so a replay resumes the same way."""

    entry_id: str
    answer: str | None = None
    approved: bool | None = None
    reason: str | None = None


class Session(BaseModel):
    status: Status = "idle"
    state: RunState | None = None
    decision_id: str | None = None  # the pending question or approval
    resolving: Resolution | None = None
    last_entry: str | None = None  # newest inbox entry whose effects are stored
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

    async def load(self, conversation_id: str) -> Session:
        raw = await self.redis.get(self.keys.session(conversation_id))
        return Session.model_validate_json(raw) if raw else Session()

    async def save(self, lease: Lease, session: Session) -> None:
        """Store the session if `lease` still holds the conversation; else raise LockLost."""
        session.updated_at = time.time()
        keys = [self.keys.lock(lease.conversation_id), self.keys.session(lease.conversation_id)]
        args: list[str | int] = [lease.value, session.model_dump_json(), self.ttl_ms]
        if not await self._write(keys=keys, args=args):
            raise LockLost(lease.conversation_id)
