"""Telegram answers while they are written: the real runtime, the real Anthropic client
streaming from the fake Messages API, python-telegram-bot against the fake Bot API."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import redis.asyncio as aioredis

from adapters.base import ConversationKey, OutboundMessage
from adapters.telegram import TelegramAdapter, TelegramConfig
from agent.llm.anthropic import AnthropicModel
from agent.protocols import ProgressEvent
from bot.config import Settings
from bot.conversation.engine import LOST_TEXT
from bot.runtime.keys import Keys
from bot.runtime.outbox import Outbox
from bot.runtime.streaming import AnswerStream
from tests.bot.harness import Harness, parley
from tests.bot.runtime.test_round_trips import monitored
from tests.fakes import anthropic as fa
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.helpers import until

ANA, GROUP = 42, -100123
ANSWER = (
    "Here is a longer answer that arrives in pieces, so the chat shows it growing "
    "long before the model has finished writing the last sentence of it."
)
PACE = 0.06  # seconds between 6-character deltas: ~1.5 s of writing, well past the first show


def streaming_settings(**streaming: Any) -> Settings:
    return Settings.load(
        env_file=None,
        runtime={"PARLEY_RECLAIM_IDLE": 0.5, "PARLEY_LOCK_LEASE": 2},
        streaming={"PARLEY_STREAM_INTERVAL": 0.1, **streaming},
    )


@contextlib.asynccontextmanager
async def bot(
    redis: aioredis.Redis,
    telegram: FakeTelegram,
    hosted: FakeAnthropic,
    *,
    model: Any = None,  # default: Anthropic alone
    **streaming: Any,
) -> AsyncIterator[tuple[Harness, TelegramAdapter]]:
    adapter = TelegramAdapter(
        config=TelegramConfig(
            open_access=True, token=telegram.token, api_url=telegram.url, poll_timeout=1
        )
    )
    if model is None:
        model = AnthropicModel(api_key="sk-ant-test", model="claude-test", base_url=hosted.url)
    try:
        async with parley(
            redis, model, config=streaming_settings(**streaming), chat=adapter
        ) as harness:
            yield harness, adapter
    finally:
        await model.close()


@contextlib.asynccontextmanager
async def anthropic() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as fake:
        yield fake


def when(fake: FakeTelegram, method: str) -> list[float]:
    return [r.received_at for r in fake.method_calls(method)]


async def test_a_private_answer_streams_as_drafts_then_arrives_once(
    redis, telegram: FakeTelegram
) -> None:
    # The model writes its next piece only once the chat shows everything written so far,
    # so the drafts follow the writing however slowly the machine runs.
    pieces = [ANSWER[i : i + 12] for i in range(0, len(ANSWER), 12)]
    written: dict[str, float] = {}  # the text so far → when its newest piece was written

    def shown(text: str) -> bool:
        return any(d and d[-1] == text for d in telegram.drafts.values())

    async def when_shown(n: int) -> None:
        if n:
            await until(lambda: shown("".join(pieces[:n]).strip()), within=10)
        written["".join(pieces[: n + 1]).strip()] = time.monotonic()

    async with anthropic() as hosted, bot(redis, telegram, hosted) as (harness, _):
        hosted.script(fa.streamed(ANSWER, chunk=12, gate=when_shown))
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="tell me"))
        await until(lambda: len(telegram.chat(ANA)) == 1)
        await harness.settle()
        assert [p.text for p in telegram.chat(ANA)] == [ANSWER]
        assert len(telegram.method_calls("sendMessage")) == 1
        (drafts,) = telegram.drafts.values()
        # each piece was shown as it was written (the whole answer perhaps once more, when
        # the last interval ended before the answer was sent)
        assert [d for d in drafts if d != ANSWER] == [t for t in written if t != ANSWER]
        assert len(drafts) >= 3 and drafts.count(ANSWER) <= 1
        sent = when(telegram, "sendMessageDraft")
        assert sent[-1] < when(telegram, "sendMessage")[0]
        # nothing is shown before the answer has been written for the first-show hold, and
        # then a draft at most every interval (0.1 s) after the one before
        assert sent[0] - written[drafts[0]] >= 0.5
        for earlier, later in zip(drafts, sent[1:], strict=False):
            assert later - written[earlier] >= 0.1


async def test_a_group_answer_is_one_message_edited_as_it_grows(
    redis, telegram: FakeTelegram
) -> None:
    async with anthropic() as hosted, bot(redis, telegram, hosted) as (harness, _):
        hosted.script(fa.streamed(ANSWER, pace=PACE, chunk=6))
        telegram.push(
            telegram.message(chat_id=GROUP, user_id=ANA, text="@parley_bot hi", chat_type="group")
        )
        await until(lambda: bool(telegram.chat(GROUP)) and telegram.chat(GROUP)[0].text == ANSWER)
        await harness.settle()
        (message,) = telegram.chat(GROUP)
        assert message.text == ANSWER and message.edits, "the message grew"
        assert all(ANSWER.startswith(earlier) for earlier in message.edits)
        assert not telegram.drafts and len(telegram.method_calls("sendMessage")) == 1


async def test_a_streamed_group_answer_replies_to_the_message_that_asked(
    redis, telegram: FakeTelegram
) -> None:
    """The growing message becomes the answer, so it quotes the question from its first
    send (an edit cannot add a reply), in the topic the question was asked in."""
    async with anthropic() as hosted, bot(redis, telegram, hosted) as (harness, _):
        hosted.script(fa.streamed(ANSWER, pace=PACE, chunk=6))
        hosted.script(fa.streamed(ANSWER, pace=PACE, chunk=6))
        asked = telegram.message(
            chat_id=GROUP, user_id=ANA, text="@parley_bot hi", chat_type="supergroup", thread_id=5
        )
        telegram.push(asked)
        await until(lambda: bool(telegram.chat(GROUP)) and telegram.chat(GROUP)[0].text == ANSWER)
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="and here?"))
        await until(lambda: len(telegram.chat(ANA)) == 1)
        await harness.settle()
    (message,) = telegram.chat(GROUP)
    assert message.edits, "it streamed"
    in_group, in_private = telegram.method_calls("sendMessage")
    quoted = json.loads(in_group.body["reply_parameters"])
    assert quoted == {
        "message_id": asked["message"]["message_id"],
        "allow_sending_without_reply": True,
    }
    assert in_group.body["message_thread_id"] == "5"
    assert telegram.drafts, "the private answer streamed as drafts"
    assert "reply_parameters" not in in_private.body  # nobody else to tell apart


async def test_a_429_pauses_the_edits_and_the_answer_still_lands_once(
    redis, telegram: FakeTelegram
) -> None:
    async with anthropic() as hosted, bot(redis, telegram, hosted) as (harness, _):
        hosted.script(fa.streamed(ANSWER, pace=0.08, chunk=6))
        telegram.fail_next("editMessageText", retry_after=1)
        telegram.push(
            telegram.message(chat_id=GROUP, user_id=ANA, text="@parley_bot hi", chat_type="group")
        )
        await until(lambda: bool(telegram.chat(GROUP)) and telegram.chat(GROUP)[0].text == ANSWER)
        await harness.settle()
        (message,) = telegram.chat(GROUP)
        assert message.text == ANSWER
        edits = when(telegram, "editMessageText")
        assert len(edits) >= 2 and edits[1] - edits[0] >= 0.95, "retry_after was honoured"


async def test_typing_is_refreshed_while_a_run_works(redis, telegram: FakeTelegram) -> None:
    async with anthropic() as hosted, bot(redis, telegram, hosted) as (harness, adapter):
        adapter.progress_refresh = 0.3
        hosted.script(fa.Item("text", [{"type": "text", "text": "done"}], delay=2.0))
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="slow one"))
        await until(lambda: len(telegram.chat(ANA)) == 1)
        await harness.settle()
        typing = when(telegram, "sendChatAction")
        assert len(typing) >= 3, "typing shown again while the model thinks"


async def test_streaming_off_sends_whole_answers(redis, telegram: FakeTelegram) -> None:
    async with (
        anthropic() as hosted,
        bot(redis, telegram, hosted, PARLEY_STREAMING="off") as (harness, _),
    ):
        hosted.script(fa.streamed(ANSWER, pace=0.01))
        telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="tell me"))
        await until(lambda: len(telegram.chat(ANA)) == 1)
        await harness.settle()
        assert telegram.chat(ANA)[0].text == ANSWER and not telegram.drafts
        assert "stream" not in hosted.message_calls[-1].body


# --- exactly once across a crash -----------------------------------------------------------


def delta(text: str) -> ProgressEvent:
    return ProgressEvent(kind="text_delta", step=1, detail={"text": text})


async def test_a_replay_after_a_crash_completes_the_half_message(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    adapter = TelegramAdapter(
        config=TelegramConfig(open_access=True, token=telegram.token, api_url=telegram.url)
    )
    await adapter.initialize()
    conversation = ConversationKey(platform="telegram", chat_id=str(GROUP))
    key = Keys("parley").outbox("entry-1:1")

    def stream() -> AnswerStream:
        live = adapter.live(conversation, user_id=str(ANA), team_id=None, is_direct=False)
        return AnswerStream(
            live=live,
            adapter=adapter,
            conversation=conversation,
            redis=redis,
            redis_key=key,
            ttl_ms=60_000,
            interval=0.05,
        )

    try:
        crashed = stream()
        await crashed.on_progress(delta("Half of the ans"))
        await crashed.settle()  # the worker died here: a half message, never finished
        (half,) = telegram.chat(GROUP)
        assert half.text == "Half of the ans"
        assert json.loads(await redis.get(key)) == {"live": str(half.message_id)}

        replay = stream()
        for piece in ("Half of the ans", "wer, and the rest."):
            await replay.on_progress(delta(piece))
        ref = await replay.finish(OutboundMessage(text="Half of the answer, and the rest."))
        (whole,) = telegram.chat(GROUP)
        assert whole.text == "Half of the answer, and the rest."
        assert ref is not None and ref.message_id == str(half.message_id)

        again = stream()
        await again.on_progress(delta("Half"))
        assert await again.finish(OutboundMessage(text="Half, again")) == ref
        assert [p.text for p in telegram.chat(GROUP)] == ["Half of the answer, and the rest."]
        assert len(telegram.method_calls("sendMessage")) == 1
    finally:
        await adapter.stop()


async def test_a_replay_that_ends_in_a_question_still_posts_the_question(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    adapter = TelegramAdapter(
        config=TelegramConfig(open_access=True, token=telegram.token, api_url=telegram.url)
    )
    await adapter.initialize()
    conversation = ConversationKey(platform="telegram", chat_id=str(GROUP))
    keys = Keys("parley")

    def stream() -> AnswerStream:
        live = adapter.live(conversation, user_id=str(ANA), team_id=None, is_direct=False)
        return AnswerStream(
            live=live,
            adapter=adapter,
            conversation=conversation,
            redis=redis,
            redis_key=keys.outbox("entry-1:outcome"),
            ttl_ms=60_000,
            interval=0.05,
        )

    try:
        crashed = stream()
        await crashed.on_progress(delta("Let me think"))
        await crashed.settle()  # the worker died here, with a half message shown
        replay = stream()
        await replay.discard()  # this time the run asks a question instead
        outbox = Outbox(redis, keys, ttl=60, lost_text=LOST_TEXT)
        question = OutboundMessage(text="Which day?")
        ref = await outbox.send(adapter, "entry-1:outcome", conversation, question)
        assert ref is not None
        assert telegram.chat(GROUP)[-1].text == "Which day?"
    finally:
        await adapter.stop()


async def test_group_edits_keep_inside_telegrams_group_limit(redis, telegram: FakeTelegram) -> None:
    async with anthropic() as hosted, bot(redis, telegram, hosted) as (harness, _):
        hosted.script(fa.streamed(ANSWER, pace=0.2, chunk=6))  # about 5 s of writing
        telegram.push(
            telegram.message(chat_id=GROUP, user_id=ANA, text="@parley_bot hi", chat_type="group")
        )
        await until(lambda: bool(telegram.chat(GROUP)) and telegram.chat(GROUP)[0].text == ANSWER)
        await harness.settle()
        first = when(telegram, "sendMessage")[0]
        edits = when(telegram, "editMessageText")
        assert edits[0] - first >= 2.9, "a group message is edited at most every 3 s"
        assert len(edits) <= 3


async def test_an_answer_never_shown_claims_its_key_and_learns_it_in_one_call(
    redis: aioredis.Redis, redis_url: str, telegram: FakeTelegram
) -> None:
    # An entry taken from the backlog may have been tried before, so its key must be read;
    # a quick answer reads it as it claims it, with no GET of its own.
    adapter = TelegramAdapter(
        config=TelegramConfig(open_access=True, token=telegram.token, api_url=telegram.url)
    )
    await adapter.initialize()
    conversation = ConversationKey(platform="telegram", chat_id=str(GROUP))
    keys = Keys("parley")

    def stream(entry: str) -> AnswerStream:
        live = adapter.live(conversation, user_id=str(ANA), team_id=None, is_direct=False)
        return AnswerStream(
            live=live,
            adapter=adapter,
            conversation=conversation,
            redis=redis,
            redis_key=keys.outbox(f"{entry}:outcome"),
            ttl_ms=60_000,
            interval=0.05,
            first_show=0.5,
        )

    try:
        async with monitored(redis_url) as commands:
            quick = stream("entry-1")
            await quick.on_progress(delta("Done."))
            await quick.settle()
            ref = await quick.finish(OutboundMessage(text="Done."))
            await asyncio.sleep(0.3)  # the monitor's last lines
        assert ref is not None and [p.text for p in telegram.chat(GROUP)] == ["Done."]
        key = keys.outbox("entry-1:outcome")
        assert await redis.get(key) == json.dumps(ref.message_id).encode()
        claim, record = [c.split() for c in commands if key in c]
        assert claim[:3] == ["SET", key, "in-flight"] and {"NX", "GET"} <= set(claim[3:])
        assert record[:2] == ["SET", key]

        # a finish that died midway left its claim: the claim meets it, and nothing is sent
        await redis.set(keys.outbox("entry-2:outcome"), b"in-flight", px=60_000)
        interrupted = stream("entry-2")
        await interrupted.on_progress(delta("Done again."))
        assert await interrupted.finish(OutboundMessage(text="Done again.")) is None
        assert await redis.get(keys.outbox("entry-2:outcome")) == b"in-flight"
        assert [p.text for p in telegram.chat(GROUP)] == ["Done."]
    finally:
        await adapter.stop()


# --- a run that stalled past its lock's lease while another worker took the entry over -----


def run_stream(
    adapter: TelegramAdapter,
    redis: aioredis.Redis,
    chat: int,
    entry: str,
    *,
    first_try: bool,
    first_show: float = 0.0,
) -> AnswerStream:
    """One run's stream of `entry`'s answer (`first_try`: it never reads the key first)."""
    conversation = ConversationKey(platform="telegram", chat_id=str(chat))
    live = adapter.live(conversation, user_id=str(ANA), team_id=None, is_direct=chat > 0)
    return AnswerStream(
        live=live,
        adapter=adapter,
        conversation=conversation,
        redis=redis,
        redis_key=Keys("parley").outbox(f"{entry}:outcome"),
        ttl_ms=60_000,
        interval=0.05,
        first_show=first_show,
        mode="live" if first_try else "unknown",
    )


async def test_a_stalled_first_try_does_not_answer_after_the_run_that_took_it_over(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    """Worker A's event loop stalled past the lease mid-run; worker B took the lock, ran the
    entry again and answered. A, resuming, finishes a stream it began as the entry's first
    try (so it never read the key): it must post nothing, in a group or a private chat, with
    or without a half message shown before or after the takeover."""
    adapter = TelegramAdapter(
        config=TelegramConfig(open_access=True, token=telegram.token, api_url=telegram.url)
    )
    await adapter.initialize()
    keys = Keys("parley")

    def stream(chat: int, entry: str, *, first_try: bool, first_show: float) -> AnswerStream:
        return run_stream(adapter, redis, chat, entry, first_try=first_try, first_show=first_show)

    answer = OutboundMessage(text="The plan is to ship on Friday.")
    try:
        # 1. A quick answer: A shows nothing, stalls, B answers, A finishes.
        stale = stream(GROUP, "entry-1", first_try=True, first_show=0.5)
        await stale.on_progress(delta("The plan"))
        taker = stream(GROUP, "entry-1", first_try=False, first_show=0.5)
        await taker.on_progress(delta(answer.text))
        ref = await taker.finish(answer)
        assert ref is not None
        assert await stale.finish(answer) == ref
        assert [p.text for p in telegram.chat(GROUP)] == [answer.text]

        # 2. A showed half before stalling: B completes that message; A posts nothing.
        stale = stream(GROUP, "entry-2", first_try=True, first_show=0.0)
        await stale.on_progress(delta("The plan is"))
        await stale.settle()
        assert [p.text for p in telegram.chat(GROUP)][1:] == ["The plan is"]
        taker = stream(GROUP, "entry-2", first_try=False, first_show=0.0)
        await taker.on_progress(delta(answer.text))
        taken = await taker.finish(answer)
        assert await stale.finish(answer) == taken
        assert [p.text for p in telegram.chat(GROUP)] == [answer.text, answer.text]
        assert not telegram.deleted

        # 3. A's first show comes after B answered: its half is taken back, nothing posted.
        stale = stream(GROUP, "entry-3", first_try=True, first_show=0.0)
        taker = stream(GROUP, "entry-3", first_try=False, first_show=0.5)
        await taker.on_progress(delta(answer.text))
        taken = await taker.finish(answer)
        await stale.on_progress(delta("The plan is"))
        await stale.settle()
        assert await stale.finish(answer) == taken
        shown = [p.text for p in telegram.chat(GROUP)]
        assert shown == [answer.text] * 3, shown

        # 4. A private chat (drafts): B answered; A's finish posts nothing.
        stale = stream(ANA, "entry-4", first_try=True, first_show=0.0)
        await stale.on_progress(delta("The plan is"))
        await stale.settle()
        taker = stream(ANA, "entry-4", first_try=False, first_show=0.0)
        await taker.on_progress(delta(answer.text))
        taken = await taker.finish(answer)
        assert await stale.finish(answer) == taken
        assert [p.text for p in telegram.chat(ANA)] == [answer.text]
        assert (
            await redis.get(keys.outbox("entry-4:outcome"))
            == json.dumps(taken.message_id if taken else None).encode()
        )
    finally:
        await adapter.stop()


async def test_a_stalled_run_that_ends_in_a_question_leaves_the_takeovers_answer_alone(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    """The stale run showed half an answer, stalled, and then (the model thinking again)
    ends in a question: it must not clear the key the run that took over answered under,
    or its question would go out under that key after the answer."""
    adapter = TelegramAdapter(
        config=TelegramConfig(open_access=True, token=telegram.token, api_url=telegram.url)
    )
    await adapter.initialize()
    conversation = ConversationKey(platform="telegram", chat_id=str(GROUP))
    keys = Keys("parley")
    key = "entry-1:outcome"

    def stream(*, first_try: bool) -> AnswerStream:
        return run_stream(adapter, redis, GROUP, "entry-1", first_try=first_try)

    try:
        stale = stream(first_try=True)
        await stale.on_progress(delta("The plan is"))
        await stale.settle()
        taker = stream(first_try=False)
        await taker.on_progress(delta("The plan is to ship on Friday."))
        taken = await taker.finish(OutboundMessage(text="The plan is to ship on Friday."))
        assert taken is not None
        await stale.discard()  # the stale run asks instead
        outbox = Outbox(redis, keys, ttl=60, lost_text=LOST_TEXT)
        await outbox.send(adapter, key, conversation, OutboundMessage(text="Which day?"))
        assert [p.text for p in telegram.chat(GROUP)] == ["The plan is to ship on Friday."]
        assert await redis.get(keys.outbox(key)) == json.dumps(taken.message_id).encode()
    finally:
        await adapter.stop()


async def test_a_run_cancelled_mid_send_by_its_lost_lock_is_not_answered_again(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    """The lock is found lost while the stale run's sendMessage is on its way (Telegram has
    it): the cancelled run lets the call end and records it, and the run that took the entry
    over posts nothing, rather than the key being let go and the answer posted twice."""
    adapter = TelegramAdapter(
        config=TelegramConfig(open_access=True, token=telegram.token, api_url=telegram.url)
    )
    await adapter.initialize()
    keys = Keys("parley")

    def stream(*, first_try: bool) -> AnswerStream:
        return run_stream(adapter, redis, GROUP, "entry-1", first_try=first_try, first_show=0.5)

    answer = OutboundMessage(text="The plan is to ship on Friday.")
    answered = asyncio.Event()
    telegram.before["sendMessage"] = answered.wait  # Telegram has the call, not yet answered
    try:
        stale = asyncio.create_task(stream(first_try=True).finish(answer))
        await until(lambda: len(telegram.method_calls("sendMessage")) == 1)
        stale.cancel()  # while_held: the renewal found the lock lost
        await asyncio.sleep(0.2)
        taker = asyncio.create_task(stream(first_try=False).finish(answer))
        await asyncio.sleep(0.2)
        answered.set()
        results = await asyncio.gather(stale, taker, return_exceptions=True)
        assert isinstance(results[0], asyncio.CancelledError)
        await asyncio.sleep(0.2)
        assert [p.text for p in telegram.chat(GROUP)] == [answer.text]
        (posted,) = telegram.chat(GROUP)
        stored = await redis.get(keys.outbox("entry-1:outcome"))
        assert stored == json.dumps(str(posted.message_id)).encode()
    finally:
        await adapter.stop()
