"""An entry given up after tries that did not finish, while a run that lost its lock still
answers it: the user sees the answer or the Sorry, never both (the real runtime, the real
python-telegram-bot against the fake Bot API)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import redis.asyncio as aioredis

from adapters.base import ConversationKey, OutboundMessage
from adapters.telegram import TelegramAdapter, TelegramConfig
from bot.conversation.engine import ERROR_TEXT
from bot.runtime.failures import CutShort
from bot.runtime.keys import Keys
from bot.runtime.records import GIVEN_UP
from tests.adapters.test_telegram_stream import GROUP, delta, run_stream
from tests.agent.scripted import ScriptedModel
from tests.bot.harness import Harness, running
from tests.bot.recording import message
from tests.fakes.telegram import FakeTelegram

CHAT = ConversationKey(platform="telegram", chat_id=str(GROUP))
ANSWER = OutboundMessage(text="The plan is to ship on Friday.")


@contextlib.asynccontextmanager
async def runtime(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> AsyncIterator[tuple[Harness, TelegramAdapter]]:
    adapter = TelegramAdapter(
        config=TelegramConfig(open_access=True, token=telegram.token, api_url=telegram.url)
    )
    await adapter.initialize()
    try:
        async with running(redis, ScriptedModel([]), adapter=adapter) as harness:  # type: ignore[arg-type]
            yield harness, adapter
    finally:
        await adapter.stop()


async def give_up(harness: Harness, entry: str) -> None:
    """What the next holder does with an entry whose three tries did not finish."""
    cut = CutShort("3 tries did not finish")
    event = message(CHAT, "hello", direct=False)
    await harness.runtime.worker.failures.give_up(CHAT.id, entry, event, {}, cut, attempts=3)


def seen(telegram: FakeTelegram) -> list[str]:
    return [p.text for p in telegram.chat(GROUP)]


async def test_an_entry_answered_by_a_run_that_lost_its_lock_is_given_up_without_a_sorry(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    async with runtime(redis, telegram) as (harness, adapter):
        # the stale run answered (its claim unchecked against the lock) before the give-up
        stale = run_stream(adapter, redis, GROUP, "1-1", first_try=True)
        assert await stale.finish(ANSWER) is not None
        await give_up(harness, "1-1")
        assert seen(telegram) == [ANSWER.text]

        # its send is still on its way (claimed, not yet recorded): no Sorry either
        await redis.set(Keys().outbox("1-2:outcome"), b"in-flight:abc", px=60_000)
        await give_up(harness, "1-2")
        assert seen(telegram) == [ANSWER.text]
    letters = await redis.xrange(Keys().dead_letters)
    assert [fields[b"entry"] for _, fields in letters] == [b"1-1", b"1-2"]  # dead-lettered


async def test_a_run_that_lost_its_lock_posts_nothing_after_its_entry_was_given_up(
    redis: aioredis.Redis, telegram: FakeTelegram
) -> None:
    async with runtime(redis, telegram) as (harness, adapter):
        # the give-up comes first; the stale stream then finishes: the Sorry alone
        stale = run_stream(adapter, redis, GROUP, "2-1", first_try=True)
        await give_up(harness, "2-1")
        assert await stale.finish(ANSWER) is None
        assert seen(telegram) == [ERROR_TEXT]
        assert await redis.get(Keys().outbox("2-1:outcome")) == GIVEN_UP

        # a stale run that answers without streaming (the outbox's send) posts nothing either
        await give_up(harness, "2-2")
        posted = await harness.runtime.outbox.send(adapter, "2-2:outcome", CHAT, ANSWER)
        assert posted is None
        assert seen(telegram) == [ERROR_TEXT, ERROR_TEXT]

        # it had shown half its answer: the Sorry goes out, and the half is taken back
        stale = run_stream(adapter, redis, GROUP, "2-3", first_try=True)
        await stale.on_progress(delta("The plan is"))
        await stale.settle()
        assert seen(telegram)[-1] == "The plan is"
        await give_up(harness, "2-3")
        assert await stale.finish(ANSWER) is None
        assert seen(telegram) == [ERROR_TEXT] * 3
        assert len(telegram.deleted) == 1
