""" "What do you know about me?" on Telegram and Slack: the real adapters against the fake
platforms, the real runtime and memory (Redis Stack, the packaged embedder) and a scripted
model. Three facts told in three separate runs, then the question; another person asking
the same sees none of them; /memories lists them with Forget buttons that work."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlencode

import aiohttp
import redis.asyncio as aioredis

from adapters.slack import SlackAdapter, SlackConfig
from adapters.telegram import TelegramAdapter, TelegramConfig
from agent.messages import ChatRequest, ChatResponse
from bot.ops.http import HttpServer
from memory import Embedder, RedisMemoryStore, open_store
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import Harness, running
from tests.fakes import slack as fs
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram
from tests.helpers import until

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
FACTS = [
    ("remember that my dog is called Bruno", "Ana's dog is called Bruno"),
    ("note that I'm allergic to peanuts", "Ana is allergic to peanuts"),
    ("keep in mind I work night shifts at the hospital", "Ana works night shifts at a hospital"),
]
ASK = "what do you know about me?"


def telling(fact: str) -> list[ChatResponse]:
    return [turn(call("remember", text=fact)), reply("Noted.")]


def listing_then_answering(seen: list[ChatRequest]) -> list[Callable[[ChatRequest], Any]]:
    """The model's two steps for the question: call list_memories, then answer from it."""

    def ask_for_the_list(request: ChatRequest) -> ChatResponse:
        seen.append(request)
        return turn(call("list_memories"))

    def answer(request: ChatRequest) -> ChatResponse:
        seen.append(request)
        listed = request.messages[-1].tool_results[0].content
        lines = [line.split(") ", 1)[1] for line in listed.splitlines() if line.startswith("- [")]
        return reply("Here's what I know: " + "; ".join(lines) if lines else "Nothing yet.")

    return [ask_for_the_list, answer]


# --- Telegram ---------------------------------------------------------------------------------

ANA, BOB = 42, 7


@contextlib.asynccontextmanager
async def telegram_bot(
    redis: aioredis.Redis, fake: FakeTelegram, model: ScriptedModel, store: RedisMemoryStore
) -> AsyncIterator[Harness]:
    adapter = TelegramAdapter(
        config=TelegramConfig(open_access=True, token=fake.token, api_url=fake.url, poll_timeout=1)
    )
    async with running(redis, model, adapter=adapter, memory=store) as harness:  # type: ignore[arg-type]
        adapter.handler = harness.runtime.inbox.submit
        await adapter.start()
        await adapter.start_polling()
        try:
            yield harness
        finally:
            await adapter.stop()


async def test_what_do_you_know_about_me_on_telegram(
    redis: aioredis.Redis, embedder: Embedder
) -> None:
    store = await open_store(redis, embedder)
    ana_sees: list[ChatRequest] = []
    bob_sees: list[ChatRequest] = []
    script: list[Any] = [step for _, fact in FACTS for step in telling(fact)]
    script += listing_then_answering(ana_sees) + listing_then_answering(bob_sees)
    model = ScriptedModel(script)
    async with FakeTelegram() as fake, telegram_bot(redis, fake, model, store) as harness:
        for n, (said, _) in enumerate(FACTS, 1):  # three runs, one fact each
            fake.push(fake.message(chat_id=ANA, user_id=ANA, text=said))
            await until(lambda n=n: len(fake.chat(ANA)) == n)
            await harness.settle(within=30)
        fake.push(fake.message(chat_id=ANA, user_id=ANA, text=ASK))
        await until(lambda: len(fake.chat(ANA)) == 4)
        fake.push(fake.message(chat_id=BOB, user_id=BOB, text=ASK, name="Bob"))
        await until(lambda: len(fake.chat(BOB)) == 1)
        await harness.settle(within=30)

        answer = fake.chat(ANA)[3].text
        for _, fact in FACTS:
            assert fact in answer
            assert fact in ana_sees[0].system  # recall listed them before the first step
        assert fake.chat(BOB)[0].text == "Nothing yet."
        for request in bob_sees:
            assert "Ana" not in request.system and "Bruno" not in str(request.messages)

        fake.push(fake.message(chat_id=ANA, user_id=ANA, text="/memories"))
        await until(lambda: len(fake.chat(ANA)) == 5)
        listing = fake.chat(ANA)[4]
        assert [b["text"] for b in listing.buttons] == ["Forget 1", "Forget 2", "Forget 3"]
        assert "1. Ana works night shifts at a hospital (private)" in listing.text
        fake.click(listing, "Forget 1", user_id=ANA)
        await until(lambda: bool(fake.method_calls("answerCallbackQuery")))
        await harness.settle(within=30)
        assert fake.method_calls("answerCallbackQuery")[0].body["text"] == "Forgotten."
        left = [m.text for m in (await store.list_memories(harness_context(ANA))).records]
        assert left == ["Ana is allergic to peanuts", "Ana's dog is called Bruno"]

        fake.click(listing, "Forget 2", user_id=BOB, name="Bob")  # not Bob's to forget
        await until(lambda: len(fake.method_calls("answerCallbackQuery")) == 2)
        await harness.settle(within=30)
        assert "isn't yours" in fake.method_calls("answerCallbackQuery")[1].body["text"]
        assert (await store.list_memories(harness_context(ANA))).total == 2


def harness_context(user: int):  # type: ignore[no-untyped-def]
    from agent.protocols import RunContext

    return RunContext(
        conversation_id=f"telegram:-:{user}:-",
        platform="telegram",
        user_id=str(user),
        chat_id=str(user),
    )


# --- Slack ------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def slack_bot(
    redis: aioredis.Redis, model: ScriptedModel, store: RedisMemoryStore
) -> AsyncIterator[tuple[FakeSlack, Harness, str, aiohttp.ClientSession]]:
    async with FakeSlack() as fake:
        adapter = SlackAdapter(
            config=SlackConfig(bot_token="xoxb-test", signing_secret=SECRET, api_url=fake.api_url)
        )
        async with running(redis, model, adapter=adapter, memory=store) as harness:  # type: ignore[arg-type]
            adapter.handler = harness.runtime.inbox.submit
            await adapter.start()
            server = HttpServer("127.0.0.1", 0)
            server.add_route(*adapter.slack_route())
            await server.start()
            http = aiohttp.ClientSession()
            try:
                yield fake, harness, f"http://127.0.0.1:{server.port}/slack/events", http
            finally:
                await http.close()
                await server.stop()
                await adapter.stop()


async def post_event(http: aiohttp.ClientSession, url: str, event: dict[str, Any]) -> None:
    body = json.dumps(fs.event_callback(event)).encode()
    response = await http.post(url, data=body, headers=fs.signed(SECRET, body))
    assert response.status == 200


async def post_form(http: aiohttp.ClientSession, url: str, body: bytes) -> None:
    headers = fs.signed(SECRET, body, content_type="application/x-www-form-urlencoded")
    response = await http.post(url, data=body, headers=headers)
    assert response.status == 200


def ephemeral_press(post: fs.Post, label: str, *, user: str) -> bytes:
    """A button press on an ephemeral message: Slack sends no `message`, only the container."""
    button = next(b for b in post.buttons if b["text"]["text"] == label)
    payload = {
        "type": "block_actions",
        "user": {"id": user, "team_id": fs.TEAM},
        "team": {"id": fs.TEAM},
        "api_app_id": "A1",
        "channel": {"id": post.channel},
        "container": {
            "type": "message",
            "message_ts": post.ts,
            "channel_id": post.channel,
            "is_ephemeral": True,
        },
        "trigger_id": "trig-ephemeral",
        "response_url": "https://hooks.invalid/response",
        "actions": [
            {
                "type": "button",
                "action_id": button["action_id"],
                "block_id": "b",
                "value": button["value"],
                "action_ts": fs.message_ts(),
            }
        ],
    }
    return urlencode({"payload": json.dumps(payload)}).encode()


async def test_what_do_you_know_about_me_on_slack(
    redis: aioredis.Redis, embedder: Embedder
) -> None:
    store = await open_store(redis, embedder)
    ana_sees: list[ChatRequest] = []
    bob_sees: list[ChatRequest] = []
    script: list[Any] = [step for _, fact in FACTS for step in telling(fact)]
    script += listing_then_answering(ana_sees) + listing_then_answering(bob_sees)
    model = ScriptedModel(script)
    async with slack_bot(redis, model, store) as (fake, harness, url, http):
        for n, (said, _) in enumerate(FACTS, 1):
            await post_event(http, url, fs.dm_event("UANA", said, channel="DANA"))
            await until(lambda n=n: len(fake.in_channel("DANA")) == n)
            await harness.settle(within=30)
        await post_event(http, url, fs.dm_event("UANA", ASK, channel="DANA"))
        await until(lambda: len(fake.in_channel("DANA")) == 4)
        await post_event(http, url, fs.dm_event("UBOB", ASK, channel="DBOB"))
        await until(lambda: len(fake.in_channel("DBOB")) == 1)
        await harness.settle(within=30)

        answer = fake.in_channel("DANA")[3].body
        for _, fact in FACTS:
            assert fact.replace("'", "&#39;") in answer or fact in answer
            assert fact in ana_sees[0].system
        assert fake.in_channel("DBOB")[0].body == "Nothing yet."
        assert all("Bruno" not in r.system and "peanuts" not in r.system for r in bob_sees)

        await post_form(http, url, fs.slash_command("UANA", "memories", channel="DANA"))
        await until(lambda: len(fake.in_channel("DANA")) == 5)
        listing = fake.in_channel("DANA")[4]
        assert listing.ephemeral_to == "UANA"
        assert [b["text"]["text"] for b in listing.buttons] == ["Forget 1", "Forget 2", "Forget 3"]
        await post_form(http, url, ephemeral_press(listing, "Forget 3", user="UANA"))
        await until(lambda: len(fake.in_channel("DANA")) == 6)
        await harness.settle(within=30)
        assert fake.in_channel("DANA")[5].body == "Forgotten."
        context = harness_slack_context("UANA", "DANA")
        left = [m.text for m in (await store.list_memories(context)).records]
        assert left == ["Ana works night shifts at a hospital", "Ana is allergic to peanuts"]


def harness_slack_context(user: str, channel: str):  # type: ignore[no-untyped-def]
    from agent.protocols import RunContext

    return RunContext(
        conversation_id=f"slack:{fs.TEAM}:{channel}:-",
        platform="slack",
        user_id=user,
        chat_id=channel,
        team_id=fs.TEAM,
    )
