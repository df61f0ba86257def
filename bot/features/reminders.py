"""Reminders: due work (`bot/runtime/due.py`), posted once by whichever worker claims them.

A worker that dies before posting lets its claim's lease run out and the reminder becomes due
again; the outbox key `reminder:<id>` keeps a re-claimed reminder from being posted twice.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import KW_ONLY, dataclass

from pydantic import BaseModel

from adapters.base import ConversationKey, OutboundMessage
from adapters.platform import ChatAdapter
from adapters.traits import mention
from agent.protocols import RunContext
from bot.ops import metrics
from bot.ops.health import Health
from bot.runtime.due import DueKeys, DueLoop
from bot.runtime.keys import reminder_key
from bot.runtime.outbox import Outbox

log = logging.getLogger(__name__)

# A reminder record outlives its due time by this much, for a late or re-claimed delivery.
KEEP_AFTER_DUE = 7 * 86_400.0


class Reminder(BaseModel):
    id: str
    text: str
    due_at: float
    conversation_id: str
    user_id: str
    user_name: str = ""


@dataclass(eq=False)
class ReminderScheduler(DueLoop[Reminder]):
    """The agent's `Scheduler`, and the loop that posts due reminders."""

    outbox: Outbox
    adapters: dict[str, ChatAdapter]
    _: KW_ONLY
    said: str  # the reminder as posted ({who}, {text}): the engine's sentence, as data
    claim_for: float = 60.0

    def __post_init__(self, health: Health | None) -> None:
        due = DueKeys(
            due=self.keys.reminders_due,
            claimed=self.keys.reminders_claimed,
            record=self.keys.reminder,
        )
        self.due_work(
            due, Reminder, kind="reminder", loop="reminders", lease=self.claim_for, health=health
        )

    async def schedule_reminder(self, text: str, due_at: float, context: RunContext) -> str:
        reminder_id = uuid.uuid4().hex[:16]
        record = Reminder(
            id=reminder_id,
            text=text,
            due_at=due_at,
            conversation_id=context.conversation_id,
            user_id=context.user_id,
            user_name=context.user_name,
        )
        ttl = max(due_at - time.time(), 0) + KEEP_AFTER_DUE
        await self.work.put(reminder_id, record, due_at, ttl)
        log.info("reminder %s scheduled for %.0f", reminder_id, due_at)
        return reminder_id

    async def due_pass(self) -> int:
        return await self.deliver_due()

    async def deliver_due(self, now: float | None = None) -> int:
        now = time.time() if now is None else now
        delivered = 0
        for reminder_id, reminder in await self.work.claim(now):
            if await self._deliver(reminder_id, reminder):
                delivered += 1
        return delivered

    async def _deliver(self, reminder_id: str, reminder: Reminder) -> bool:
        conversation = ConversationKey.parse(reminder.conversation_id)
        adapter = self.adapters.get(conversation.platform)
        if adapter is None:
            log.error("no adapter for reminder %s in %s", reminder_id, conversation.platform)
            metrics.REMINDERS.labels("undeliverable").inc()
            return False
        who = mention(conversation.platform, reminder.user_id, reminder.user_name)
        message = OutboundMessage(
            text=self.said.format(who=who, text=reminder.text), allowed_mentions=frozenset({who})
        )
        try:
            await self.outbox.send(adapter, reminder_key(reminder_id), conversation, message)
        except Exception:
            log.exception("reminder %s not delivered; it will be retried", reminder_id)
            metrics.REMINDERS.labels("retry").inc()
            return False
        await self.work.done(reminder_id)
        metrics.REMINDERS.labels("sent").inc()
        return True
