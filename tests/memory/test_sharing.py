"""Remembering privately needs no approval; publishing to the whole team needs the author's yes."""

from __future__ import annotations

import redis.asyncio as aioredis

from adapters.base import ConversationKey
from agent.protocols import RunContext
from memory import RedisMemoryStore
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import running
from tests.bot.recording import RecordingAdapter, click, message

SLACK_DM = ConversationKey(platform="slack", chat_id="DANA", team_id="T1")


async def scopes(store: RedisMemoryStore, text: str) -> list[str]:
    """The kinds of scope (user, chat, team) that hold `text`, as the author sees them."""
    owner = RunContext(
        conversation_id=SLACK_DM.id, platform="slack", user_id="42", chat_id="DANA", team_id="T1"
    )
    found = (await store.list_memories(owner, limit=100)).records
    return sorted({m.scope.split(":", 1)[0] for m in found if m.text == text})


async def test_private_memories_are_kept_without_asking(
    redis: aioredis.Redis, store: RedisMemoryStore
) -> None:
    model = ScriptedModel([turn(call("remember", text="My dog is called Bruno")), reply("Noted.")])
    async with running(redis, model, memory=store, adapter=RecordingAdapter("slack")) as harness:
        chat = SLACK_DM
        await harness.submit(message(chat, "remember my dog is Bruno"))
        await harness.settle()
        assert harness.adapter.texts(chat) == ["Noted."]
        assert await scopes(store, "My dog is called Bruno") == ["user"]


async def test_sharing_with_the_team_waits_for_the_authors_approval(
    redis: aioredis.Redis, store: RedisMemoryStore
) -> None:
    text = "Our launch date is March 3"
    model = ScriptedModel(
        [
            turn(call("remember", text=text, share="team")),
            reply("Shared with the team."),
            turn(call("remember", text="Budget is 5k", share="team")),
            reply("Kept it to myself."),
        ]
    )
    async with running(redis, model, memory=store, adapter=RecordingAdapter("slack")) as harness:
        chat = SLACK_DM
        await harness.submit(message(chat, "tell the team the launch date"))
        await harness.settle()
        [approval] = harness.adapter.in_conversation(chat)
        assert approval.message.buttons and text in approval.message.text
        assert await scopes(store, text) == []  # nothing published before the yes

        await harness.submit(click(chat, approval, "approve"))
        await harness.settle()
        assert harness.adapter.texts(chat)[-1] == "Shared with the team."
        assert await scopes(store, text) == ["team"]

        await harness.submit(message(chat, "and share the budget"))
        await harness.settle()
        second = harness.adapter.in_conversation(chat)[-1]
        await harness.submit(click(chat, second, "reject"))
        await harness.settle()
        assert await scopes(store, "Budget is 5k") == []
