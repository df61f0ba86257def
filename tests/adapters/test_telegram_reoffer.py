"""An ephemeral prompt nobody pressed is offered again where it will arrive: in each
receiver's private chat (its buttons decide in the group), or visibly in the group for one
Parley may not write to first. The wait is an injected clock, not a sleep. The real runtime,
python-telegram-bot against the fake Bot API."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import redis.asyncio as aioredis

from adapters.telegram import TelegramAdapter
from tests.adapters.test_telegram import ANA, GROUP, SENT, until
from tests.adapters.test_telegram_private import CARA, ask, bot
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import Harness
from tests.fakes.telegram import FakeTelegram


class Clock:
    """Stands in for the re-offer's wait: it ends when the test says the time has come."""

    def __init__(self) -> None:
        self.due = asyncio.Event()
        self.waited: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.waited.append(seconds)
        await self.due.wait()


@contextlib.asynccontextmanager
async def emailing(
    redis: aioredis.Redis,
) -> AsyncIterator[tuple[FakeTelegram, Harness, TelegramAdapter, Clock]]:
    SENT.clear()
    model = ScriptedModel([turn(call("send_email", to="bo@example.com")), reply("Sent.")])
    clock = Clock()
    async with (
        FakeTelegram() as telegram,
        bot(redis, telegram, model, approvers=f"{CARA}") as (harness, adapter),
    ):
        adapter.reoffers.sleep = clock.sleep
        yield telegram, harness, adapter, clock


async def test_an_ephemeral_prompt_never_pressed_is_offered_where_it_will_arrive(
    redis: aioredis.Redis,
) -> None:
    async with emailing(redis) as (telegram, harness, adapter, clock):
        telegram.unreachable.add(CARA)  # Cara never started a private chat with Parley
        ask(telegram, "email Bo")
        await until(lambda: len(telegram.chat(GROUP)) == 2)
        await harness.settle()
        assert clock.waited == [adapter.config.reoffer_after]
        assert [p.receiver for p in telegram.chat(GROUP)] == [ANA, CARA]

        clock.due.set()  # nobody pressed within the time
        await until(lambda: len(telegram.chat(ANA)) == 1 and len(telegram.chat(GROUP)) == 3)
        (private,) = telegram.chat(ANA)
        visible = telegram.chat(GROUP)[2]
        assert visible.receiver is None and "bo@example.com" in visible.text
        assert private.text == visible.text
        assert [b["text"] for b in private.buttons][:2] == ["Approve", "Reject"]

        # Ana approves in her own chat: the group's request goes on, in the group
        telegram.click(private, "Approve", user_id=ANA)
        await until(lambda: any(p.text == "Sent." for p in telegram.chat(GROUP)))
        await harness.settle()
    assert SENT == ["bo@example.com"]
    # every copy shows the decision and has no buttons left
    for copy in (*telegram.chat(GROUP)[:3], private):
        assert "Approved by Ana" in copy.text and copy.buttons == [], copy
    assert telegram.chat(ANA) == [private]  # nothing else went to her private chat


async def test_a_prompt_answered_in_time_is_not_offered_again(redis: aioredis.Redis) -> None:
    async with emailing(redis) as (telegram, harness, _, clock):
        ask(telegram, "email Bo")
        await until(lambda: len(telegram.chat(GROUP)) == 2)
        await harness.settle()
        for_cara = telegram.chat(GROUP)[1]
        telegram.click(for_cara, "Approve", user_id=CARA, name="Cara", chat_type="supergroup")
        await until(lambda: any(p.text == "Sent." for p in telegram.chat(GROUP)))
        await harness.settle()
        clock.due.set()
        await asyncio.sleep(0)  # a cancelled wait has nothing left to run
        await harness.settle()
        posts = [p.text for p in telegram.chat(GROUP)]
    assert SENT == ["bo@example.com"]
    assert telegram.chat(ANA) == [] and telegram.chat(CARA) == []
    assert posts[2:] == ["Sent."]


async def test_a_press_from_a_copy_by_someone_else_is_refused(redis: aioredis.Redis) -> None:
    """Break it: Bob cannot approve through a copy's group-naming buttons either."""
    async with emailing(redis) as (telegram, harness, _, clock):
        ask(telegram, "email Bo")
        await until(lambda: len(telegram.chat(GROUP)) == 2)
        await harness.settle()
        clock.due.set()
        await until(lambda: len(telegram.chat(ANA)) == 1 and len(telegram.chat(CARA)) == 1)
        (private,) = telegram.chat(ANA)
        telegram.click(private, "Approve", user_id=7, name="Bob")
        await until(lambda: len(telegram.method_calls("answerCallbackQuery")) == 1)
        await harness.settle()
        refusal = telegram.method_calls("answerCallbackQuery")[0].body["text"]
    assert "Only Ana" in refusal and SENT == []
