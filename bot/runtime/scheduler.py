"""Reminders: kept in a Redis sorted set by due time, posted once by whichever worker claims them.

Claiming moves a due reminder to a "claimed" set with a deadline, atomically; a worker that
dies before posting lets the deadline pass and the reminder becomes due again. The outbox
key `reminder:<id>` keeps a re-claimed reminder from being posted twice.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid

import redis.asyncio as aioredis

from adapters.base import (
    ConversationKey,
    OutboundMessage,
    mention,
)
from adapters.platform import ChatAdapter
from agent.protocols import RunContext
from bot.ops import metrics
from bot.ops.health import Health, repeat
from bot.runtime.keys import Keys
from bot.runtime.outbox import Outbox

log = logging.getLogger(__name__)

# Claim due members of KEYS[1] into KEYS[2] until ARGV[2]; a claim whose deadline passed (its
# worker died) is due again first. Reminders and followed MCP tasks are claimed this way.
CLAIM = """
local stale = redis.call('zrangebyscore', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])
for _, id in ipairs(stale) do
  redis.call('zrem', KEYS[2], id)
  redis.call('zadd', KEYS[1], ARGV[1], id)
end
local due = redis.call('zrangebyscore', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])
for _, id in ipairs(due) do
  redis.call('zrem', KEYS[1], id)
  redis.call('zadd', KEYS[2], ARGV[2], id)
end
return due
"""

# A reminder record outlives its due time by this much, for a late or re-claimed delivery.
KEEP_AFTER_DUE = 7 * 86_400.0


class ReminderScheduler:
    """The agent's `Scheduler`, and the loop that posts due reminders."""

    def __init__(
        self,
        redis: aioredis.Redis,
        keys: Keys,
        outbox: Outbox,
        adapters: dict[str, ChatAdapter],
        *,
        said: str,  # the reminder as posted ({who}, {text}): the engine's sentence, as data
        poll: float = 1.0,
        claim_for: float = 60.0,
        health: Health | None = None,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.outbox = outbox
        self.adapters = adapters
        self.said = said
        self.poll = poll
        self.claim_for = claim_for
        self._claim = redis.register_script(CLAIM)
        self.heartbeat = (health or Health()).register("reminders", every=poll + 30.0)

    async def schedule_reminder(self, text: str, due_at: float, context: RunContext) -> str:
        reminder_id = uuid.uuid4().hex[:16]
        record = {
            "id": reminder_id,
            "text": text,
            "due_at": due_at,
            "conversation_id": context.conversation_id,
            "user_id": context.user_id,
            "user_name": context.user_name,
        }
        ttl = max(due_at - time.time(), 0) + KEEP_AFTER_DUE
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(self.keys.reminder(reminder_id), json.dumps(record), px=int(ttl * 1000))
            pipe.zadd(self.keys.reminders_due, {reminder_id: due_at})
            await pipe.execute()
        log.info("reminder %s scheduled for %.0f", reminder_id, due_at)
        return reminder_id

    async def run(self, stop: asyncio.Event) -> None:
        await repeat(stop, self.heartbeat, self.deliver_due, self.poll)

    async def deliver_due(self, now: float | None = None) -> int:
        now = time.time() if now is None else now
        ids = await self._claim(
            keys=[self.keys.reminders_due, self.keys.reminders_claimed],
            args=[now, now + self.claim_for, 50],
        )
        delivered = 0
        for raw_id in ids:
            reminder_id = raw_id.decode() if isinstance(raw_id, bytes) else raw_id
            if await self._deliver(reminder_id):
                delivered += 1
        return delivered

    async def _deliver(self, reminder_id: str) -> bool:
        raw = await self.redis.get(self.keys.reminder(reminder_id))
        if raw is None:
            await self.redis.zrem(self.keys.reminders_claimed, reminder_id)
            return False
        record = json.loads(raw)
        conversation = ConversationKey.parse(record["conversation_id"])
        adapter = self.adapters.get(conversation.platform)
        if adapter is None:
            log.error("no adapter for reminder %s in %s", reminder_id, conversation.platform)
            metrics.REMINDERS.labels("undeliverable").inc()
            return False
        who = mention(conversation.platform, record["user_id"], record["user_name"])
        message = OutboundMessage(
            text=self.said.format(who=who, text=record["text"]), allowed_mentions=frozenset({who})
        )
        try:
            await self.outbox.send(adapter, f"reminder:{reminder_id}", conversation, message)
        except Exception:
            log.exception("reminder %s not delivered; it will be retried", reminder_id)
            metrics.REMINDERS.labels("retry").inc()
            return False
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.zrem(self.keys.reminders_claimed, reminder_id)
            pipe.delete(self.keys.reminder(reminder_id))
            await pipe.execute()
        metrics.REMINDERS.labels("sent").inc()
        return True
