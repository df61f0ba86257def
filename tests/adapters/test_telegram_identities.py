"""Budgets count per person, whatever identity they post as: someone writing in a group as one
channel after another (`sender_chat`) does not get a fresh daily budget with each channel.
Real Telegram payloads (the corpus' anonymous-admin message) through the real adapter, then
the limits on the real Redis."""

from __future__ import annotations

from dataclasses import replace

import redis.asyncio as aioredis

from adapters.base import Actor, InboundMessage
from agent.messages import Usage
from bot.config import Settings
from bot.conversation.limits import USER_BUDGET_SPENT, Limits
from tests.adapters.test_corpus import _inbox_events, telegram_bot
from tests.adapters.test_corpus_findings import corpus, mentioning, post_update
from tests.fakes.telegram import FakeTelegram


def as_channel(number: int, channel_id: int, *, chat_id: int | None = None) -> dict:
    update = corpus("telegram", "teloxide__crates_teloxide-core_src_types_message.json#6")
    update["update_id"] = 50_000 + number
    message = update["message"]
    message["message_id"] = 9_000 + number
    message["sender_chat"] = {"id": channel_id, "title": f"Channel {number}", "type": "channel"}
    if chat_id is not None:
        message["chat"]["id"] = chat_id
    mentioning(message, "text", "write me a very long essay")
    return update


def limits(redis: aioredis.Redis) -> Limits:
    settings = Settings.load(env_file=None, limits={"PARLEY_USER_DAILY_TOKENS": 1000})
    return Limits(redis, "parley", settings.limits)


async def test_posting_as_another_channel_does_not_reset_the_budget(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    async with telegram_bot(redis, telegram) as (_, url):
        for number, channel in enumerate([-1001111, -1002222, -1003333]):
            assert await post_update(url, as_channel(number, channel)) == 200
        first, second, third = await _inbox_events(redis)
    assert isinstance(first, InboundMessage) and isinstance(second, InboundMessage)
    assert isinstance(third, InboundMessage)
    assert len({first.actor.user_id, second.actor.user_id, third.actor.user_id}) == 3
    guard = limits(redis)
    assert await guard.admission(first) is None
    await guard.charge_event(first, Usage(input_tokens=900, output_tokens=100))
    assert await guard.admission(second) == USER_BUDGET_SPENT
    assert await guard.admission(third) == USER_BUDGET_SPENT


async def test_a_channel_identity_in_another_group_and_people_keep_their_own_budgets(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    async with telegram_bot(redis, telegram) as (_, url):
        assert await post_update(url, as_channel(1, -1001111)) == 200
        assert await post_update(url, as_channel(2, -1001111, chat_id=-1009999)) == 200
        here, elsewhere = await _inbox_events(redis)
    guard = limits(redis)
    await guard.charge_event(here, Usage(input_tokens=1000))
    assert await guard.admission(elsewhere) is None  # another group's share
    assert isinstance(here, InboundMessage)
    person = replace(here, actor=Actor(platform="telegram", user_id="42"))
    assert await guard.admission(person) is None  # a person's own budget is untouched
