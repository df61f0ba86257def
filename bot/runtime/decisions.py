"""Pending decisions: a clarifying question or an approval, waiting for a button or a reply.

A decision outlives its expiry by a grace period so a late click can be told what became of
it ("already approved by Ana", "expired") instead of meeting silence.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from collections.abc import Callable
from typing import Literal

import redis.asyncio as aioredis
from pydantic import BaseModel
from redis.asyncio.client import Pipeline

from bot.runtime.codec import as_text
from bot.runtime.keys import Keys

Kind = Literal["question", "approval"]
Status = Literal["pending", "approved", "rejected", "answered", "cancelled", "expired"]

GRACE = 7 * 86_400.0

# A decision is a hash: the immutable record as JSON, plus its mutable outcome fields.
_DECIDE = """
if redis.call('hget', KEYS[1], 'status') ~= 'pending' then return 0 end
redis.call('hset', KEYS[1], 'status', ARGV[1], 'decided_by', ARGV[2], 'decided_at', ARGV[3])
redis.call('zrem', KEYS[2], ARGV[4])
return 1
"""


class Decision(BaseModel):
    id: str
    kind: Kind
    conversation_id: str
    requester_id: str
    requester_name: str = ""
    text: str  # what the message showed, so an edit can keep it and add the outcome
    options: list[str] = []
    message_id: str | None = None
    is_direct: bool = False
    requester_only: bool = False  # a tool's own question (MCP elicitation)
    # A private run's decision: its prompt went to this person alone, and only a press on that
    # message (or in their private chat, where Telegram puts it) decides it.
    private_to: str | None = None
    created_at: float
    expires_at: float
    status: Status = "pending"
    decided_by: str = ""
    decided_at: float = 0.0

    def expired(self, now: float | None = None) -> bool:
        return self.status == "pending" and (now or time.time()) >= self.expires_at


def new_decision_id() -> str:
    # Short: Telegram callback data holds 64 bytes for the id and the choice together.
    return secrets.token_urlsafe(9)


def decision_id_for(conversation_id: str, entry_id: str) -> str:
    """The id of the decision an inbox entry asks for: the same when the entry is replayed,
    so the buttons of a prompt posted before a crash still point at the pending decision."""
    digest = hashlib.sha256(f"{conversation_id}/{entry_id}".encode()).digest()
    return base64.urlsafe_b64encode(digest[:9]).decode()


class DecisionStore:
    def __init__(self, redis: aioredis.Redis, keys: Keys, *, ttl: float) -> None:
        self.redis = redis
        self.keys = keys
        self.ttl = ttl
        self._decide = redis.register_script(_DECIDE)

    def new(self, id: str | None = None, **fields: object) -> Decision:
        now = time.time()
        return Decision(
            id=id or new_decision_id(),
            created_at=now,
            expires_at=now + self.ttl,
            **fields,  # type: ignore[arg-type]
        )

    async def save(self, decision: Decision) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            self.queued(decision)(pipe)
            await pipe.execute()

    def queued(self, decision: Decision) -> Callable[[Pipeline], None]:
        """The decision's write, to add to a pipeline another write's round trip sends (it
        is written as the decision is when the pipeline is filled)."""

        def queue(pipe: Pipeline) -> None:
            key = self.keys.decision(decision.id)
            record = decision.model_dump_json(exclude={"status", "decided_by", "decided_at"})
            pipe.hset(
                key,
                mapping={
                    "record": record,
                    "status": decision.status,
                    "decided_by": decision.decided_by,
                    "decided_at": decision.decided_at,
                },
            )
            pipe.pexpire(key, int((self.ttl + GRACE) * 1000))
            if decision.status == "pending":
                pipe.zadd(self.keys.pending(decision.kind), {decision.id: decision.expires_at})

        return queue

    async def get(self, decision_id: str) -> Decision | None:
        raw = await self.redis.hgetall(self.keys.decision(decision_id))
        if not raw:
            return None
        fields = {as_text(k): as_text(v) for k, v in raw.items()}
        decision = Decision.model_validate_json(fields["record"])
        decision.status = fields["status"]  # type: ignore[assignment]
        decision.decided_by = fields["decided_by"]
        decision.decided_at = float(fields["decided_at"])
        return decision

    async def decide(self, decision: Decision, status: Status, by: str) -> Decision | None:
        """Move a pending decision to `status` once; returns it as decided, or None if it was
        decided already (the script changes only these three fields, so nothing is read back)."""
        now = time.time()
        result = await self._decide(
            keys=[self.keys.decision(decision.id), self.keys.pending(decision.kind)],
            args=[status, by, f"{now:.3f}", decision.id],
        )
        if not result:
            return None
        update = {"status": status, "decided_by": by, "decided_at": float(f"{now:.3f}")}
        return decision.model_copy(update=update)

    async def count_pending(self, kind: Kind) -> int:
        """Pending decisions of a kind that have not expired (expired ones are pruned)."""
        key = self.keys.pending(kind)
        now = time.time()
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.zremrangebyscore(key, "-inf", now)
            pipe.zcard(key)
            _, count = await pipe.execute()
        return int(count)
