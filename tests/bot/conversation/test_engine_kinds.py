"""Adapters hand over what they saw; the engine says the sentence, through the outbox."""

from __future__ import annotations

from dataclasses import replace

import redis.asyncio as aioredis

from adapters.base import Addressing, ConversationKey
from bot.conversation.engine import NOT_ALLOWED, TEXT_ONLY
from tests.agent.scripted import ScriptedModel
from tests.bot.harness import running
from tests.bot.recording import RecordingAdapter, dm, message


async def test_neutral_kinds_are_answered_by_the_engine_without_the_model(
    redis: aioredis.Redis,
) -> None:
    model = ScriptedModel([])
    async with running(redis, model) as harness:
        chat = dm()
        await harness.submit(replace(message(chat, ""), kind="non_text"))
        await harness.submit(replace(message(chat, "x" * 4000), kind="too_long", length=9000))
        await harness.submit(replace(message(chat, ""), kind="bare_mention"))
        await harness.settle(within=30)
        texts = harness.adapter.texts(chat)
        assert texts[0] == TEXT_ONLY
        assert "too long for me (9,000 characters; my limit is 4,000)" in texts[1]
        assert texts[2] == "Tell me what you need, or send /help to see my commands."
        assert model.requests == []
        session = await harness.runtime.sessions.load(chat.id)
        assert session.status == "idle" and session.last_entry is not None


async def test_a_stranger_is_told_once_per_conversation(redis: aioredis.Redis) -> None:
    async with running(redis, ScriptedModel([])) as harness:
        chat, other_chat = dm("7"), dm("8")
        for text in ("hello?", "anyone?", "/help"):
            await harness.submit(replace(message(chat, text, user="7"), kind="not_allowed"))
        await harness.submit(replace(message(other_chat, "hi", user="7"), kind="not_allowed"))
        await harness.settle(within=30)
        assert harness.adapter.texts(chat) == [NOT_ALLOWED]
        assert harness.adapter.texts(other_chat) == [NOT_ALLOWED]


async def test_a_bare_mention_in_a_group_names_the_adapters_handle(redis: aioredis.Redis) -> None:
    adapter = RecordingAdapter()
    # What the adapter declares: how to mention Parley there (Telegram's, once getMe answered).
    adapter.addressing = Addressing(mention="@parley_bot")  # type: ignore[attr-defined]
    async with running(redis, ScriptedModel([]), adapter=adapter) as harness:
        group = ConversationKey(platform="telegram", chat_id="-100")
        await harness.submit(replace(message(group, "", direct=False), kind="bare_mention"))
        await harness.settle(within=30)
        [text] = adapter.texts(group)
        assert "“@parley_bot what's on today?”" in text
