"""Due work (`bot/runtime/due.py`) under reminders: claimed under a lease, due again when its
worker died, and an unreadable record dropped and reported once instead of failing every pass."""

from __future__ import annotations

import logging

import pytest
import redis.asyncio as aioredis

from agent.protocols import RunContext
from bot.conversation import texts
from bot.features.reminders import ReminderScheduler
from bot.ops import metrics
from bot.runtime.keys import Keys
from bot.runtime.outbox import Outbox
from tests.bot.recording import RecordingAdapter

KEYS = Keys()
ANA = RunContext(
    conversation_id="telegram:-:42:-",
    platform="telegram",
    user_id="42",
    chat_id="42",
    user_name="Ana",
)


def reminders(redis: aioredis.Redis, adapter: RecordingAdapter) -> ReminderScheduler:
    outbox = Outbox(redis, KEYS, ttl=60, lost_text="lost", backoff=0.0)
    return ReminderScheduler(
        redis, KEYS, outbox, {"telegram": adapter}, said=texts.REMINDER, claim_for=60
    )


def unreadable() -> float:
    return metrics.DUE_UNREADABLE.labels("reminder")._value.get()


async def test_an_unreadable_reminder_is_dropped_once_and_the_others_go_out(
    redis: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="bot.runtime.due")
    adapter = RecordingAdapter()
    scheduler = reminders(redis, adapter)
    await redis.set(KEYS.reminder("junk"), b'{"id": "junk", "text": ')  # cut off mid-write
    await redis.zadd(KEYS.reminders_due, {"junk": 100.0})
    await scheduler.schedule_reminder("water the plants", 100.0, ANA)
    before = unreadable()

    assert await scheduler.deliver_due(now=200.0) == 1
    assert await scheduler.deliver_due(now=300.0) == 0  # the next pass is clean

    assert [p.message.text for p in adapter.posted] == [
        texts.REMINDER.format(who="Ana", text="water the plants")
    ]
    assert unreadable() == before + 1
    assert [r.getMessage() for r in caplog.records] == [
        "reminder junk has an unreadable record (1 errors); dropping it"
    ]
    assert not await redis.exists(KEYS.reminder("junk"))
    assert await redis.zcard(KEYS.reminders_due) + await redis.zcard(KEYS.reminders_claimed) == 0


async def test_a_claimed_reminder_waits_for_its_lease_and_is_due_again_after_it(
    redis: aioredis.Redis,
) -> None:
    """A worker that claimed a reminder and died: nobody posts it during the lease, the next
    pass after the lease does, once."""
    adapter = RecordingAdapter()
    scheduler = reminders(redis, adapter)
    reminder = await scheduler.schedule_reminder("stand up", 100.0, ANA)
    [(claimed, _)] = await scheduler.work.claim(now=100.0)  # the worker that dies
    assert claimed == reminder

    assert await scheduler.deliver_due(now=159.0) == 0  # its lease (60 s) still holds
    assert await scheduler.deliver_due(now=161.0) == 1
    assert await scheduler.deliver_due(now=300.0) == 0
    assert len(adapter.posted) == 1


async def test_a_reminder_whose_record_is_gone_is_let_go_of(redis: aioredis.Redis) -> None:
    adapter = RecordingAdapter()
    scheduler = reminders(redis, adapter)
    reminder = await scheduler.schedule_reminder("stand up", 100.0, ANA)
    await redis.delete(KEYS.reminder(reminder))  # expired, or done by a worker that then died

    assert await scheduler.deliver_due(now=200.0) == 0
    assert adapter.posted == []
    assert await redis.zcard(KEYS.reminders_due) + await redis.zcard(KEYS.reminders_claimed) == 0


async def test_reminders_stored_before_the_record_type_still_go_out(
    redis: aioredis.Redis,
) -> None:
    """Records written by the earlier hand-made JSON read as the typed record."""
    adapter = RecordingAdapter()
    scheduler = reminders(redis, adapter)
    old = (
        b'{"id": "r1", "text": "call mum", "due_at": 100.0, "conversation_id": '
        b'"telegram:-:42:-", "user_id": "42", "user_name": "Ana"}'
    )
    await redis.set(KEYS.reminder("r1"), old)
    await redis.zadd(KEYS.reminders_due, {"r1": 100.0})

    assert await scheduler.deliver_due(now=200.0) == 1
    assert [p.message.text for p in adapter.posted] == [
        texts.REMINDER.format(who="Ana", text="call mum")
    ]
