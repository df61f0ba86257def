"""The Telegram adapter on the real python-telegram-bot, against a fake Bot API server,
wired to the real runtime (Redis Stack) with a scripted model."""

from __future__ import annotations

import contextlib
import html
import logging
import re
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import redis.asyncio as aioredis

from adapters.telegram import TelegramAdapter, TelegramConfig
from agent.builtin_tools import builtin_registry
from agent.tools import tool
from bot.config import Settings
from bot.conversation.engine import NOT_ALLOWED, TEXT_ONLY
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import Harness, running
from tests.fakes.telegram import BOT_USERNAME, FakeTelegram
from tests.helpers import until

ANA, BOB, GROUP = 42, 7, -100123


def adapter_for(fake: FakeTelegram, **config: Any) -> TelegramAdapter:
    return TelegramAdapter(
        config=TelegramConfig(  # these tests talk as anyone, unless they say otherwise
            token=fake.token, api_url=fake.url, poll_timeout=1, **{"open_access": True, **config}
        )
    )


@contextlib.asynccontextmanager
async def bot(
    redis: aioredis.Redis,
    fake: FakeTelegram,
    model: ScriptedModel,
    *,
    poll: bool = True,
    settings: Settings | None = None,
    **config: Any,
) -> AsyncIterator[tuple[Harness, TelegramAdapter]]:
    adapter = adapter_for(fake, **config)
    registry = builtin_registry()
    registry.register(send_email)
    try:
        async with running(
            redis, model, adapter=adapter, tools=registry, config=settings
        ) as harness:  # type: ignore[arg-type]
            adapter.handler = harness.runtime.inbox.submit
            await adapter.start()
            if poll:
                await adapter.start_polling()
            yield harness, adapter
    finally:  # after the runtime: a reply sent while it drains would open a new HTTP session
        await adapter.stop()


SENT: list[str] = []


@tool(side_effects=True, describe=lambda args: f"Email {args['to']}")
async def send_email(to: str) -> str:
    """Send an email.

    Args:
        to: the address
    """
    SENT.append(to)
    return f"sent to {to}"


async def test_a_direct_message_round_trip(redis, telegram: FakeTelegram) -> None:
    model = ScriptedModel([reply("Hello, **Ana**!")], latency=0.7)  # slow enough to show typing
    async with bot(redis, telegram, model) as (harness, _):
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="hi"))
        await until(lambda: len(telegram.chat(ANA)) == 1)
        await harness.settle()
        assert telegram.chat(ANA)[0].text == "Hello, <b>Ana</b>!"
        assert telegram.method_calls("sendMessage")[0].body["parse_mode"] == "HTML"
        assert telegram.method_calls("sendChatAction")  # typing while it worked
        commands = telegram.method_calls("setMyCommands")[0].body["commands"]
        assert {c["command"] for c in _json(commands)} == {
            "start",
            "help",
            "memories",
            "forget",
            "correct",
            "why",
            "instructions",
            "cancel",
            "status",
            "schedules",
            "connections",
        }


async def test_groups_answer_only_when_addressed(redis, telegram: FakeTelegram) -> None:
    model = ScriptedModel([reply("Answered the mention."), reply("Answered the reply.")])
    async with bot(redis, telegram, model) as (harness, _):
        telegram.push(
            telegram.message(
                chat_id=GROUP, user_id=ANA, text="just chatting", chat_type="supergroup"
            )
        )
        telegram.push(
            telegram.message(
                chat_id=GROUP,
                user_id=ANA,
                text=f"@{BOT_USERNAME} what's up?",
                chat_type="supergroup",
            )
        )
        await until(lambda: len(telegram.chat(GROUP)) == 1)
        await harness.settle()
        telegram.push(
            telegram.message(
                chat_id=GROUP,
                user_id=BOB,
                text="and you?",
                chat_type="supergroup",
                reply_to_bot=True,
            )
        )
        await until(lambda: len(telegram.chat(GROUP)) == 2)
        await harness.settle()
        assert [p.text for p in telegram.chat(GROUP)] == [
            "Answered the mention.",
            "Answered the reply.",
        ]
        assert len(model.turn_requests) == 2
        assert model.turn_requests[0].messages[-1].text.strip() == "what's up?"


async def test_forum_topics_keep_their_thread(redis, telegram: FakeTelegram) -> None:
    model = ScriptedModel([reply("In the topic.")])
    async with bot(redis, telegram, model) as (harness, _):
        telegram.push(
            telegram.message(
                chat_id=GROUP,
                user_id=ANA,
                text=f"@{BOT_USERNAME} hi",
                chat_type="supergroup",
                thread_id=77,
            )
        )
        await until(lambda: len(telegram.chat(GROUP)) == 1)
        assert telegram.chat(GROUP)[0].thread_id == 77


async def test_option_buttons_answer_a_question(redis, telegram: FakeTelegram) -> None:
    model = ScriptedModel(
        [
            turn(call("ask_user", question="Tea or coffee?", options=["Tea", "Coffee"])),
            reply("Coffee ☕"),
        ]
    )
    async with bot(redis, telegram, model) as (harness, _):
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="a drink please"))
        await until(lambda: len(telegram.chat(ANA)) == 1)
        question = telegram.chat(ANA)[0]
        assert [b["text"] for b in question.buttons] == ["Tea", "Coffee"]
        assert all(len(b["callback_data"].encode()) <= 64 for b in question.buttons)
        telegram.click(question, "Coffee", user_id=ANA)
        await until(lambda: len(telegram.chat(ANA)) == 2)
        await harness.settle()
        assert telegram.chat(ANA)[1].text == "Coffee ☕"
        assert question.buttons == [] and "Coffee" in question.text
        assert telegram.method_calls("answerCallbackQuery")[0].body["text"] == "Coffee"


async def test_long_option_labels_are_cut_and_the_choice_is_the_whole_value(
    redis, telegram: FakeTelegram
) -> None:
    # A server (or the model obeying one) offers values far past Telegram's 64 bytes, in
    # several-byte characters; two of them differ only after the cut.
    shared = "Ωmega branch " * 10
    first, second = shared + "→ release", shared + "→ hotfix"
    model = ScriptedModel(
        [turn(call("ask_user", question="Which one?", options=[first, second])), reply("OK.")]
    )
    async with bot(redis, telegram, model) as (harness, _):
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="deploy"))
        await until(lambda: len(telegram.chat(ANA)) == 1)
        question = telegram.chat(ANA)[0]
        labels = [b["text"] for b in question.buttons]
        assert len(labels) == 2 and all(len(t.encode()) <= 64 for t in labels)
        assert labels[0].endswith("…") and first.startswith(labels[0][:-1].rstrip())
        assert all(len(b["callback_data"].encode()) <= 64 for b in question.buttons)
        pressed = telegram.callback(
            chat_id=ANA,
            user_id=ANA,
            message_id=question.message_id,
            data=question.buttons[1]["callback_data"],  # the second of two alike labels
        )
        telegram.push(pressed)
        await until(lambda: len(telegram.chat(ANA)) == 2)
        await harness.settle()
        assert second in str(model.requests[-1].messages[-1])  # the whole value, not the label


async def test_approval_by_the_requester_runs_the_tool(redis, telegram: FakeTelegram) -> None:
    SENT.clear()
    model = ScriptedModel([turn(call("send_email", to="bo@example.com")), reply("Done.")])
    async with bot(redis, telegram, model) as (harness, _):
        telegram.push(
            telegram.message(chat_id=GROUP, user_id=ANA, text="/start", chat_type="supergroup")
        )
        telegram.push(
            telegram.message(
                chat_id=GROUP, user_id=ANA, text=f"@{BOT_USERNAME} email Bo", chat_type="supergroup"
            )
        )
        # /start answers its sender alone: in their own chat with Parley, not the group
        await until(lambda: len(telegram.chat(GROUP)) == 1 and len(telegram.chat(ANA)) == 1)
        await harness.settle()
        approval = telegram.chat(GROUP)[0]
        assert approval.receiver == ANA, "the prompt is an ephemeral message for Ana alone"
        assert "Email bo@example.com" in approval.text
        assert [b["text"] for b in approval.buttons] == ["Approve", "Reject"]

        telegram.click(approval, "Approve", user_id=BOB, name="Bob", chat_type="supergroup")
        await until(lambda: len(telegram.method_calls("answerCallbackQuery")) == 1)
        await harness.settle()
        refusal = telegram.method_calls("answerCallbackQuery")[0].body
        assert refusal["show_alert"] in ("true", True) and "Only Ana can approve" in refusal["text"]
        assert SENT == [] and approval.buttons  # nothing changed

        telegram.click(approval, "Approve", user_id=ANA, chat_type="supergroup")
        await until(lambda: len(telegram.chat(GROUP)) == 2)
        await harness.settle()
        assert SENT == ["bo@example.com"]
        assert "Approved by Ana" in approval.text and approval.buttons == []
        assert telegram.chat(GROUP)[1].text == "Done."

        telegram.click_again = None
        telegram.push(
            telegram.callback(
                chat_id=GROUP,
                user_id=ANA,
                message_id=approval.message_id,
                data=_data_of(telegram, approval),
                chat_type="supergroup",
            )
        )
        await until(lambda: len(telegram.method_calls("answerCallbackQuery")) == 3)
        stale = telegram.method_calls("answerCallbackQuery")[2].body
        assert "already approved" in stale["text"] and SENT == ["bo@example.com"]


def _data_of(fake: FakeTelegram, posted: Any) -> str:
    # the buttons are gone after the decision; reconstruct what the original button carried
    original = fake.method_calls("sendMessage")
    for call_ in original:
        markup = call_.body.get("reply_markup")
        if markup and "approve" in markup:
            return str(_json(markup)["inline_keyboard"][0][0]["callback_data"])
    raise AssertionError("no approval was sent")


async def test_rejection(redis, telegram: FakeTelegram) -> None:
    SENT.clear()
    model = ScriptedModel([turn(call("send_email", to="x@example.com")), reply("I won't.")])
    async with bot(redis, telegram, model) as (harness, _):
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="email x"))
        await until(lambda: len(telegram.chat(ANA)) == 1)
        approval = telegram.chat(ANA)[0]
        telegram.click(approval, "Reject", user_id=ANA)
        await until(lambda: len(telegram.chat(ANA)) == 2)
        await harness.settle()
        assert SENT == [] and "Rejected by Ana" in approval.text


async def test_a_long_reply_is_split_and_markup_escaped(redis, telegram: FakeTelegram) -> None:
    paragraph = "Numbers < 10 & letters > z. " * 12
    long_text = "\n\n".join(f"{i}: {paragraph}" for i in range(30))  # about 10,000 characters
    code = "```python\nif a < b and c & d:\n    print('<tag>')\n```"
    model = ScriptedModel([reply(long_text + "\n\n" + code)])
    async with bot(redis, telegram, model) as (harness, _):
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="write a lot"))
        await until(lambda: bool(telegram.chat(ANA)) and "<pre>" in telegram.chat(ANA)[-1].text)
        await harness.settle()
        parts = [p.text for p in telegram.chat(ANA)]
        assert len(long_text) > 10_000 and len(parts) >= 3
        assert all(len(p) <= 4096 for p in parts)
        for part in parts:
            assert part.count("<pre>") == part.count("</pre>")
            assert "< " not in part and " & " not in part  # escaped
        joined = html.unescape(re.sub(r"<[^>]+>", "", "\n\n".join(parts)))
        for i in range(30):
            assert f"{i}: Numbers < 10 & letters > z." in joined
        assert '<pre><code class="language-python">if a &lt; b and c &amp; d:' in parts[-1]


async def test_webhook_checks_the_secret_and_dedups(redis, telegram: FakeTelegram) -> None:
    from bot.ops.http import HttpServer

    model = ScriptedModel([reply("via webhook")])
    async with bot(
        redis,
        telegram,
        model,
        poll=False,
        mode="webhook",
        webhook_url="https://parley.example.com/telegram/webhook",
        webhook_secret="s3cret-token",
    ) as (harness, adapter):
        assert telegram.method_calls("setWebhook")[0].body["secret_token"] == "s3cret-token"
        server = HttpServer("127.0.0.1", 0)
        server.add_route(*adapter.webhook_route())
        await server.start()
        url = f"http://127.0.0.1:{server.port}/telegram/webhook"
        update = telegram.message(chat_id=ANA, user_id=ANA, text="hello hook")
        try:
            async with aiohttp.ClientSession() as http:
                wrong = await http.post(
                    url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "nope"}
                )
                assert wrong.status == 403
                missing = await http.post(url, json=update)
                assert missing.status == 403
                headers = {"X-Telegram-Bot-Api-Secret-Token": "s3cret-token"}
                bad = await http.post(url, data=b"{not json", headers=headers)
                assert bad.status == 400
                for _ in range(2):  # Telegram redelivers; answered once
                    ok = await http.post(url, json=update, headers=headers)
                    assert ok.status == 200
                await harness.settle()
                assert [p.text for p in telegram.chat(ANA)] == ["via webhook"]
                health = await http.get(f"http://127.0.0.1:{server.metrics_port}/healthz")
                assert health.status == 200  # still serving after the malformed body
        finally:
            await server.stop()


async def test_a_duplicate_polled_update_is_answered_once(redis, telegram: FakeTelegram) -> None:
    model = ScriptedModel([reply("once")])
    async with bot(redis, telegram, model, poll=False) as (harness, adapter):
        update = telegram.message(chat_id=ANA, user_id=ANA, text="hi")
        from telegram import Update

        await adapter.initialize()
        for _ in range(2):
            await adapter.process(Update.de_json(update, adapter.bot))
        await harness.settle()
        assert [p.text for p in telegram.chat(ANA)] == ["once"]


async def test_unlisted_users_are_handed_over_once_per_conversation(
    redis, telegram: FakeTelegram, caplog
) -> None:
    caplog.set_level(logging.INFO, logger="adapters.telegram.inbound")
    model = ScriptedModel([reply("hi Ana"), reply("hi Carol")])
    async with bot(redis, telegram, model, allowed_users=(str(ANA), "@carol")) as (
        harness,
        adapter,
    ):
        seen = recording(adapter)
        for _ in range(3):  # a flood from one stranger reaches the inbox once
            telegram.push(telegram.message(chat_id=BOB, user_id=BOB, text="let me in"))
        telegram.push(telegram.message(chat_id=55, user_id=55, text="hey", username="Carol"))
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="hi"))
        await until(lambda: bool(telegram.chat(ANA)) and bool(telegram.chat(55)), within=20)
        await harness.settle()
        refusals = [e for e in seen if getattr(e, "kind", "") == "not_allowed"]
        assert [(e.actor.user_id, e.conversation.chat_id, e.text) for e in refusals] == [
            (str(BOB), str(BOB), "")
        ]
        assert adapter.inbound.refusals_dropped == 2
        assert sum("not on the allowlist" in r.getMessage() for r in caplog.records) == 1
        # The adapter says nothing itself; the engine refuses once.
        await until(lambda: bool(telegram.chat(BOB)), within=20)
        assert [p.text for p in telegram.chat(BOB)] == [NOT_ALLOWED]
        assert len(model.turn_requests) == 2  # Ana and @carol only


async def test_a_stranger_pressing_a_button_is_acknowledged_and_handed_over(
    redis, telegram: FakeTelegram
) -> None:
    async with bot(redis, telegram, ScriptedModel([]), allowed_users=(str(ANA),)) as (_, adapter):
        seen = recording(adapter)
        for _ in range(2):
            telegram.push(
                telegram.callback(
                    chat_id=GROUP,
                    user_id=BOB,
                    message_id=5,
                    data="d:abc:approve",
                    chat_type="supergroup",
                )
            )
        await until(lambda: len(telegram.method_calls("answerCallbackQuery")) == 2, within=20)
        answers = [c.body for c in telegram.method_calls("answerCallbackQuery")]
        assert all(not a.get("text") for a in answers)  # the spinner stops, without a word
        assert [(e.kind, e.actor.user_id, e.conversation.chat_id) for e in seen] == [
            ("not_allowed", str(BOB), str(GROUP))
        ]


async def test_non_text_bare_mentions_and_over_long_messages_are_handed_over_by_kind(
    redis, telegram: FakeTelegram
) -> None:
    model = ScriptedModel([])
    async with bot(redis, telegram, model, max_message_chars=100) as (harness, adapter):
        seen = recording(adapter)
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, sticker=True))
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="x" * 101))
        telegram.push(
            telegram.message(
                chat_id=GROUP, user_id=ANA, text=f"@{BOT_USERNAME}", chat_type="supergroup"
            )
        )
        await until(lambda: len(seen) == 3, within=20)
        await harness.settle()
        assert [(e.kind, e.text, e.length) for e in seen] == [
            ("non_text", "", 0),
            ("too_long", "x" * 100, 101),
            ("bare_mention", "", 0),
        ]
        assert all(e.event_id.startswith("tg:") for e in seen)
        assert model.requests == []
        # The engine answers each, naming the bot's own @name where a group needs it.
        await until(lambda: len(telegram.posted) == 3, within=20)
        assert [p.text for p in telegram.chat(ANA)][0] == TEXT_ONLY
        assert "too long for me" in [p.text for p in telegram.chat(ANA)][1]
        [hint] = telegram.chat(GROUP)
        assert f"@{BOT_USERNAME} what's on today?" in hint.text


def recording(adapter: TelegramAdapter) -> list[Any]:
    """What the adapter hands over, on its way to the real inbox."""
    seen: list[Any] = []
    handler = adapter.handler
    assert handler is not None

    async def record(event: Any) -> object:
        result = await handler(event)
        seen.append(event)
        return result

    adapter.handler = record
    return seen


async def test_retry_after_is_respected(redis, telegram: FakeTelegram) -> None:
    model = ScriptedModel([reply("eventually")])
    async with bot(redis, telegram, model) as (harness, _):
        telegram.fail_next("sendMessage", retry_after=1)
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="hi"))
        await until(lambda: len(telegram.chat(ANA)) == 1)
        calls = telegram.method_calls("sendMessage")
        assert len(calls) == 2
        gap = _timestamps(telegram, "sendMessage")
        assert gap[1] - gap[0] >= 0.95


def _timestamps(fake: FakeTelegram, method: str) -> list[float]:
    return [r.received_at for r in fake.method_calls(method)]


def _json(value: Any) -> Any:
    import json

    return json.loads(value) if isinstance(value, str) else value
