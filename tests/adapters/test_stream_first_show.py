"""A quickly written answer arrives as one message, with no preview; a slower one is shown
once it has been written for `PARLEY_STREAM_FIRST_SHOW`, then finished once. The real
runtime, the real Anthropic client streaming from the fake Messages API, and the real
Telegram and Slack SDKs against their fakes."""

from __future__ import annotations

import redis.asyncio as aioredis

from tests.adapters.test_slack_stream import slack_bot
from tests.adapters.test_telegram_stream import ANA, ANSWER, GROUP, PACE, anthropic, bot, until
from tests.bot.runtime.test_round_trips import monitored
from tests.fakes import anthropic as fa
from tests.fakes import slack as fs
from tests.fakes.server import FakeServer
from tests.fakes.telegram import FakeTelegram

HOLD = 0.5  # the shipped PARLEY_STREAM_FIRST_SHOW
# The quick answers come in one delta, and the hold is the longest allowed, so that even on
# a loaded machine the run is over long before it ends.
LONG_HOLD = {"PARLEY_STREAM_FIRST_SHOW": 0.9}
QUICK = fa.streamed(ANSWER, chunk=len(ANSWER))
# The calls that show, deliver or take back an answer on each platform.
TELEGRAM_ANSWERING = ("sendMessageDraft", "sendMessage", "editMessageText", "deleteMessage")
SLACK_ANSWERING = (
    "chat.startStream",
    "chat.appendStream",
    "chat.stopStream",
    "chat.postMessage",
    "chat.update",
    "chat.delete",
)


def answering(fake: FakeServer, methods: tuple[str, ...]) -> list[str]:
    """The answering calls the fake received, in order, by method name."""
    names = [r.path.rsplit("/", 1)[-1] for r in fake.requests]
    return [name for name in names if name in methods]


def live_markers(commands: list[str]) -> list[str]:
    return [c for c in commands if c.startswith("SET ") and "outbox" in c and "live" in c]


async def test_a_quick_private_answer_is_one_message_with_no_draft(
    redis: aioredis.Redis, redis_url: str, telegram: FakeTelegram
) -> None:
    async with anthropic() as hosted, bot(redis, telegram, hosted, **LONG_HOLD) as (harness, _):
        hosted.script(QUICK)
        async with monitored(redis_url) as commands:
            telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="tell me"))
            await until(lambda: len(telegram.chat(ANA)) == 1)
            await harness.settle()
    assert [p.text for p in telegram.chat(ANA)] == [ANSWER]
    assert answering(telegram, TELEGRAM_ANSWERING) == ["sendMessage"]
    assert not telegram.drafts
    assert not live_markers(commands), commands


async def test_a_quick_group_answer_is_one_message_never_edited(
    redis: aioredis.Redis, redis_url: str, telegram: FakeTelegram
) -> None:
    async with anthropic() as hosted, bot(redis, telegram, hosted, **LONG_HOLD) as (harness, _):
        hosted.script(QUICK)
        async with monitored(redis_url) as commands:
            telegram.push(
                telegram.message(
                    chat_id=GROUP, user_id=ANA, text="@parley_bot hi", chat_type="group"
                )
            )
            await until(lambda: len(telegram.chat(GROUP)) == 1)
            await harness.settle()
    (message,) = telegram.chat(GROUP)
    assert message.text == ANSWER and not message.edits
    assert answering(telegram, TELEGRAM_ANSWERING) == ["sendMessage"]
    assert not live_markers(commands), commands


async def test_a_quick_slack_answer_is_one_post_with_no_stream(redis: aioredis.Redis) -> None:
    async with slack_bot(redis, **LONG_HOLD) as s:
        s.hosted.script(QUICK)
        mention = fs.mention_event("UANA", "tell me")
        await s.event(mention)
        await until(lambda: bool(s.fake.in_channel("CGEN")))
        await s.harness.settle()
        (post,) = s.fake.in_channel("CGEN")
        assert post.text.replace("\n", " ") == ANSWER and post.thread_ts == mention["ts"]
        assert answering(s.fake, SLACK_ANSWERING) == ["chat.postMessage"]


async def test_a_slow_private_answer_shows_its_first_draft_after_the_hold(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    async with anthropic() as hosted, bot(redis, telegram, hosted) as (harness, _):
        hosted.script(fa.streamed(ANSWER, pace=PACE, chunk=6))
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="tell me"))
        await until(lambda: len(telegram.chat(ANA)) == 1)
        await harness.settle()
        [(_, first_token)] = hosted.first_tokens
    assert [p.text for p in telegram.chat(ANA)] == [ANSWER]
    drafts = telegram.method_calls("sendMessageDraft")
    assert drafts, "an answer written for longer than the hold is previewed"
    # the fake stamps the first token before sending it, so the hold ends later still
    assert drafts[0].received_at - first_token >= HOLD - 0.01
    calls = answering(telegram, TELEGRAM_ANSWERING)
    assert calls[-1] == "sendMessage" and calls.count("sendMessage") == 1


async def test_a_slow_group_answer_is_posted_after_the_hold_and_marked_live(
    redis: aioredis.Redis, redis_url: str, telegram: FakeTelegram
) -> None:
    async with anthropic() as hosted, bot(redis, telegram, hosted) as (harness, _):
        hosted.script(fa.streamed(ANSWER, pace=PACE, chunk=6))
        async with monitored(redis_url) as commands:
            telegram.push(
                telegram.message(
                    chat_id=GROUP, user_id=ANA, text="@parley_bot hi", chat_type="group"
                )
            )
            await until(
                lambda: bool(telegram.chat(GROUP)) and telegram.chat(GROUP)[0].text == ANSWER
            )
            await harness.settle()
        [(_, first_token)] = hosted.first_tokens
    (message,) = telegram.chat(GROUP)
    assert message.edits and ANSWER.startswith(message.edits[0]) and message.edits[0] != ANSWER
    [posted] = telegram.method_calls("sendMessage")
    assert posted.received_at - first_token >= HOLD - 0.01
    assert len(live_markers(commands)) == 1, "the growing message was recorded for a replay"


async def test_a_slow_slack_answer_starts_its_stream_after_the_hold(redis: aioredis.Redis) -> None:
    async with slack_bot(redis) as s:
        s.hosted.script(fa.streamed(ANSWER, pace=PACE, chunk=6))
        await s.event(fs.mention_event("UANA", "tell me"))
        await until(
            lambda: any(not p.streaming and p.text == ANSWER for p in s.fake.in_channel("CGEN"))
        )
        await s.harness.settle()
        [(_, first_token)] = s.hosted.first_tokens
        [start] = s.fake.method_calls("chat.startStream")
        assert start.received_at - first_token >= HOLD - 0.01
        assert len(s.fake.method_calls("chat.stopStream")) == 1
        assert not s.fake.method_calls("chat.postMessage")


async def test_thinking_cut_short_by_a_tool_within_the_hold_shows_nothing(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    async with anthropic() as hosted, bot(redis, telegram, hosted, **LONG_HOLD) as (harness, _):
        hosted.script(
            fa.tool("calculator", thought="Let me work that out first.", expression="6*7"),
            # the answer comes after the hold has passed since the thought: it has a hold
            # of its own, and is written well within it
            fa.Item("text", [{"type": "text", "text": ANSWER}], delay=1.2, chunk=len(ANSWER)),
        )
        telegram.push(
            telegram.message(chat_id=GROUP, user_id=ANA, text="@parley_bot 6*7?", chat_type="group")
        )
        await until(lambda: len(telegram.chat(GROUP)) == 1)
        await harness.settle()
    (message,) = telegram.chat(GROUP)
    assert message.text == ANSWER and not message.edits
    assert answering(telegram, TELEGRAM_ANSWERING) == ["sendMessage"]


async def test_thinking_cut_short_within_the_hold_starts_no_slack_stream(
    redis: aioredis.Redis,
) -> None:
    async with slack_bot(redis, **LONG_HOLD) as s:
        s.hosted.script(
            fa.tool("calculator", thought="Let me work that out first.", expression="6*7"),
            fa.Item("text", [{"type": "text", "text": ANSWER}], delay=1.2, chunk=len(ANSWER)),
        )
        await s.event(fs.mention_event("UANA", "6*7?"))
        await until(lambda: bool(s.fake.in_channel("CGEN")))
        await s.harness.settle()
        (post,) = s.fake.in_channel("CGEN")
        assert post.text.replace("\n", " ") == ANSWER and not s.fake.deleted
        assert answering(s.fake, SLACK_ANSWERING) == ["chat.postMessage"]
