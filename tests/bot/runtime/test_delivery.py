"""Sends the platform does not take: the real Telegram adapter against a fake Bot API that
answers some calls with errors, on the real runtime. Nothing strands a conversation."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from adapters.base import (
    Button,
    ConversationKey,
    DeliveryFailed,
    OutboundMessage,
    ProposedPlan,
)
from adapters.slack import SlackAdapter, SlackConfig
from adapters.telegram import TelegramAdapter, TelegramConfig
from agent.tools import ToolRegistry
from bot.config import Settings
from bot.conversation.engine import LOST_TEXT
from bot.ops import metrics
from bot.runtime.keys import Keys
from bot.runtime.outbox import Outbox
from bot.runtime.records import FAILED
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import Harness, email_tool, running, settings
from tests.bot.recording import RecordingAdapter, dm, message
from tests.fakes.slack import TEAM, FakeSlack
from tests.fakes.telegram import FakeTelegram
from tests.helpers import until

ANA = 42
CONVERSATION = f"telegram:-:{ANA}:-"


@contextlib.asynccontextmanager
async def bot(
    redis: aioredis.Redis,
    fake: FakeTelegram,
    model: ScriptedModel,
    tools: ToolRegistry | None = None,
    streaming: bool = True,
    **config: float,
) -> AsyncIterator[Harness]:
    adapter = TelegramAdapter(
        config=TelegramConfig(open_access=True, token=fake.token, api_url=fake.url, poll_timeout=1)
    )
    try:
        async with running(
            redis,
            model,
            adapter=adapter,  # type: ignore[arg-type]
            tools=tools,
            config=with_streaming(settings(**config), streaming),
        ) as harness:
            adapter.handler = harness.runtime.inbox.submit
            await adapter.start()
            await adapter.start_polling()
            yield harness
    finally:  # after the runtime: a reply sent while it drains would open a new HTTP session
        await adapter.stop()


def with_streaming(config: Settings, enabled: bool) -> Settings:
    streaming = config.streaming.model_copy(update={"enabled": enabled})
    return config.model_copy(update={"streaming": streaming})


def texts(fake: FakeTelegram) -> list[str]:
    return [p.text for p in fake.chat(ANA)]


async def status_text(harness: Harness, fake: FakeTelegram) -> str:
    before = len(fake.chat(ANA))
    fake.push(fake.message(chat_id=ANA, user_id=ANA, text="/status"))
    await until(lambda: len(fake.chat(ANA)) > before)
    await harness.settle()
    return fake.chat(ANA)[-1].text


async def test_a_send_that_fails_once_still_delivers_the_answer_once(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    telegram.answer_error("sendMessage", 502, "Bad Gateway")
    async with bot(redis, telegram, ScriptedModel([reply("Hello Ana!")])) as harness:
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="hi"))
        await until(lambda: bool(telegram.chat(ANA)))
        await harness.settle()
        assert texts(telegram) == ["Hello Ana!"]
        assert len(telegram.method_calls("sendMessage")) == 2  # the failure, then the answer
        session = await harness.runtime.sessions.load(CONVERSATION)
        assert session.status == "idle"
        assert "not working on anything" in await status_text(harness, telegram)


async def test_an_answer_the_platform_keeps_refusing_is_delivered_once_it_recovers(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    # more failures than the outbox's own attempts: the answer waits in Redis
    telegram.answer_error("sendMessage", 502, "Bad Gateway", times=4)
    async with bot(redis, telegram, ScriptedModel([reply("Worth the wait.")])) as harness:
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="hi"))
        await until(lambda: len(telegram.method_calls("sendMessage")) >= 3)
        await harness.settle()
        # the conversation is not stuck while the answer waits for the platform
        session = await harness.runtime.sessions.load(CONVERSATION)
        assert session.status == "idle" and session.last_entry is not None
        await until(lambda: bool(telegram.chat(ANA)))
        await asyncio.sleep(0.5)
        assert texts(telegram) == ["Worth the wait."]
        assert await harness.runtime.outbox.parked.count() == 0
        assert "not working on anything" in await status_text(harness, telegram)


async def test_an_undelivered_approval_prompt_is_not_orphaned(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    registry, sent = email_tool()
    model = ScriptedModel([turn(call("send_email", to="bo@example.com")), reply("Sent.")])
    telegram.answer_error("sendMessage", 500, "Internal Server Error", times=4)
    async with bot(redis, telegram, model, registry) as harness:
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="email Bo"))
        await until(lambda: len(telegram.method_calls("sendMessage")) >= 3)
        await harness.settle()
        session = await harness.runtime.sessions.load(CONVERSATION)
        assert session.status == "awaiting_approval" and session.decision_id is not None

        await until(lambda: bool(telegram.chat(ANA)))
        prompt = telegram.chat(ANA)[0]
        assert "Send an email to bo@example.com" in prompt.text and prompt.buttons
        # the late prompt is tied to its decision, so the decision can show on it
        decision_id = session.decision_id
        deadline = time.monotonic() + 20
        while (decision := await harness.runtime.decisions.get(decision_id)) is not None:
            if decision.message_id is not None or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.02)
        assert decision is not None and decision.message_id == str(prompt.message_id)
        telegram.click(prompt, "Approve", user_id=ANA)
        await until(lambda: len(telegram.chat(ANA)) == 2)
        await harness.settle()
        assert sent == ["bo@example.com"]
        assert texts(telegram)[1] == "Sent."
        assert "Approved by Ana" in prompt.text and not prompt.buttons
        assert (await harness.runtime.sessions.load(CONVERSATION)).status == "idle"


async def test_a_refusal_is_given_up_at_once_and_leaves_the_conversation_idle(
    redis: aioredis.Redis, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    telegram.answer_error("sendMessage", 403, "Forbidden: bot was blocked by the user")
    model = ScriptedModel([reply("You won't see this.")])
    async with bot(redis, telegram, model, streaming=False) as harness:
        with caplog.at_level(logging.WARNING, logger="bot.runtime.outbox"):
            telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="hi"))
            await until(lambda: bool(telegram.method_calls("sendMessage")))
            await harness.settle()
            await asyncio.sleep(0.3)  # a redelivery pass would have run by now
        assert len(telegram.method_calls("sendMessage")) == 1  # no retry of a refusal
        assert texts(telegram) == []
        assert any("giving up" in r.getMessage() for r in caplog.records)
        assert "You won't see this" not in caplog.text  # no message text in logs
        session = await harness.runtime.sessions.load(CONVERSATION)
        assert session.status == "idle"
        assert await harness.runtime.outbox.parked.count() == 0


async def test_a_reply_that_never_goes_through_is_reported_in_the_chat(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    telegram.answer_error("sendMessage", 502, "Bad Gateway", times=4)
    model = ScriptedModel([reply("Lost in transit.")])
    async with bot(redis, telegram, model, streaming=False, PARLEY_REDELIVER_FOR=0.5) as harness:
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="hi"))
        await until(lambda: bool(telegram.chat(ANA)))
        await harness.settle()
        await asyncio.sleep(0.5)
        assert texts(telegram) == [LOST_TEXT]
        assert await harness.runtime.outbox.parked.count() == 0


async def test_slack_errors_are_retried_or_given_up_by_kind(
    redis: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    general = ConversationKey(platform="slack", chat_id="CGEN", team_id=TEAM)
    gone = ConversationKey(platform="slack", chat_id="CGONE", team_id=TEAM)
    model = ScriptedModel([reply("Here you are."), reply("Nobody will read this.")])
    async with FakeSlack() as slack:
        adapter = SlackAdapter(config=SlackConfig(bot_token="xoxb-test", api_url=slack.api_url))
        async with running(redis, model, adapter=adapter) as harness:  # type: ignore[arg-type]
            slack.answer_error("chat.postMessage", "internal_error", status=500)
            await harness.submit(message(general, "hi", user="U1", direct=False))
            await harness.settle()
            assert [p.text for p in slack.in_channel("CGEN")] == ["Here you are."]

            slack.answer_error("chat.postMessage", "channel_not_found")
            with caplog.at_level(logging.WARNING, logger="bot.runtime.outbox"):
                await harness.submit(message(gone, "hi", user="U1", direct=False))
                await harness.settle()
            assert slack.in_channel("CGONE") == []
            assert len(slack.method_calls("chat.postMessage")) == 3  # 2 + 1: no retry
            assert any("channel_not_found" in r.getMessage() for r in caplog.records)
            for conversation in (general, gone):
                session = await harness.runtime.sessions.load(conversation.id)
                assert session.status == "idle"


async def test_an_unreadable_parked_reply_does_not_hold_up_the_others(
    redis: aioredis.Redis,
) -> None:
    keys = Keys()
    outbox = Outbox(redis, keys, ttl=60, lost_text=LOST_TEXT, backoff=0.0)
    adapter = RecordingAdapter()
    chat = dm()
    message = OutboundMessage(text="Back again.", allowed_mentions=frozenset({"<@U1>"}))
    await outbox.undelivered("good:outcome", chat, message, DeliveryFailed("502"))
    await redis.set(keys.undelivered_message("bad:outcome"), b"{not json")
    await redis.set(keys.undelivered_message("nowhere:outcome"), NOWHERE)
    await redis.zadd(keys.undelivered_due, {"bad:outcome": 0, "nowhere:outcome": 0})
    dropped = metrics.DUE_UNREADABLE.labels("parked reply")._value.get()
    assert await outbox.redeliver({"telegram": adapter}) == 1
    assert adapter.texts(chat) == ["Back again."]
    assert adapter.posted[0].message.allowed_mentions == frozenset({"<@U1>"})
    assert await outbox.parked.count() == 0  # both dropped, not tried on every pass
    assert metrics.DUE_UNREADABLE.labels("parked reply")._value.get() == dropped + 2
    for key in ("bad:outcome", "nowhere:outcome"):  # given up: a replay does not send it
        assert await redis.get(keys.outbox(key)) == FAILED
        assert await redis.get(keys.undelivered_message(key)) is None


# A record as parked before parked replies were due work, to a conversation key no platform has
NOWHERE = json.dumps(
    {
        "conversation": "nowhere",
        "message": {"text": "hi", "buttons": [], "allowed_mentions": []},
        "since": 0,
        "tries": 0,
    }
)


async def test_a_reply_parked_by_the_version_before_is_taken_over_and_delivered(
    redis: aioredis.Redis,
) -> None:
    """Parked replies used to sit in one sorted set with hand-written JSON records: an
    upgrade must not strand them."""
    keys = Keys()
    outbox = Outbox(redis, keys, ttl=60, lost_text=LOST_TEXT, backoff=0.0)
    adapter = RecordingAdapter()
    chat = dm()
    old = {
        "conversation": chat.id,
        "message": {
            "text": "Held over.",
            "buttons": [{"label": "Approve", "value": "approve", "style": None}],
            "decision_id": "D9",
            "private_to": None,
            "unreachable": None,
            "audience": [],
            "reply_url": None,
            "reply_to": None,
            "allowed_mentions": ["<@U1>"],
            "plan": None,
        },
        "since": time.time(),
        "tries": 2,
    }
    await redis.set(keys.undelivered_message("old:outcome"), json.dumps(old))
    await redis.zadd(keys.undelivered, {"old:outcome": 0})
    assert await outbox.redeliver({"telegram": adapter}) == 1
    (posted,) = adapter.posted
    assert posted.message.text == "Held over." and posted.message.decision_id == "D9"
    assert posted.message.buttons[0].label == "Approve"
    assert posted.message.allowed_mentions == frozenset({"<@U1>"})
    assert await redis.zcard(keys.undelivered) == 0 and await outbox.parked.count() == 0


async def test_a_parked_plan_prompt_comes_back_as_the_plain_prompt(redis: aioredis.Redis) -> None:
    keys = Keys()
    outbox = Outbox(redis, keys, ttl=60, lost_text=LOST_TEXT, backoff=0.0)
    adapter = RecordingAdapter()
    chat = dm()
    plan = ProposedPlan(title="Proposed plan", steps=(("send_email", "Email Bo"),), requester="1")
    buttons = (Button(label="Approve", value="approve"), Button(label="Reject", value="reject"))
    prompt = OutboundMessage(text="May I?", buttons=buttons, decision_id="D1", plan=plan)
    await outbox.undelivered("p:outcome", chat, prompt, DeliveryFailed("502"))
    assert await outbox.redeliver({"telegram": adapter}) == 1
    (again,) = adapter.posted
    shown = again.message  # the buttons, with no plan to draw
    assert (shown.text, shown.buttons, shown.decision_id, shown.plan) == (
        "May I?",
        buttons,
        "D1",
        None,
    )
