"""An ephemeral prompt nobody pressed is offered again where it will arrive: in each
receiver's private chat (its buttons decide in the group), or visibly in the group for one
Parley may not write to first. The offer is due work in Redis (bot/features/reoffers.py), so a
restart, a Redis outage or a second worker neither loses nor doubles it; the time is passed
in, not waited for. The real runtime, python-telegram-bot against the fake Bot API."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from adapters.base import Button, ConversationKey, OutboundMessage
from adapters.telegram import TelegramAdapter, TelegramConfig
from agent.builtin_tools import builtin_registry
from bot.config import Settings
from bot.features.reoffers import RETRY, PromptOffers
from bot.ops import metrics
from bot.ops.health import Health
from bot.runtime.keys import Keys
from bot.wiring.platforms import Platforms
from tests.adapters.test_telegram import ANA, BOB, GROUP, SENT, send_email, until
from tests.adapters.test_telegram_private import CARA, ask
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import Harness, parley
from tests.fakes.telegram import FakeTelegram
from tests.private_redis import private_redis

AFTER = 300.0  # PARLEY_TELEGRAM_REOFFER_AFTER's default


def telegram_adapter(telegram: FakeTelegram, offers: PromptOffers) -> TelegramAdapter:
    """A process's Telegram adapter, keeping its prompts' offers in `offers`."""
    adapter = TelegramAdapter(
        config=TelegramConfig(
            token=telegram.token, api_url=telegram.url, poll_timeout=1, open_access=True
        ),
    )
    adapter.reoffers.store = offers  # as bot/wiring/platforms.py does
    offers.deliver = adapter.reoffers.offer
    return adapter


@pytest.fixture
def offers(redis: aioredis.Redis) -> PromptOffers:
    """The offers of the process under test, in the test's Redis."""
    return PromptOffers(redis, Keys())


def process(telegram: FakeTelegram, offers: PromptOffers) -> dict[str, Any]:
    """What one Parley process is given in a group where Cara is an approver (new objects each
    time, on the same Redis and the same Telegram): its Telegram adapter keeping its prompts'
    offers in `offers`, and send_email, which needs approval."""
    registry = builtin_registry()
    registry.register(send_email)
    config = Settings.load(
        env_file=None,
        runtime={"PARLEY_RECLAIM_IDLE": 0.5, "PARLEY_LOCK_LEASE": 2},
        access={"PARLEY_APPROVERS": f"{CARA}"},
    )
    return {"chat": telegram_adapter(telegram, offers), "tools": registry, "config": config}


async def test_the_runtime_starts_and_stops_the_re_offer_loop_with_its_other_loops(
    redis: aioredis.Redis,
) -> None:
    """The re-offer loop is one of the runtime's loops: one `async with` starts it (the offer
    goes out when due, nobody calling it by hand) and stops it, its heartbeat among the
    process's."""
    health = Health()
    offers = PromptOffers(redis, Keys(), poll=0.05)
    async with FakeTelegram() as telegram:
        options = {**process(telegram, offers), "health": health, "offers": offers}
        options["chat"].reoffers.after = 0.2
        async with parley(redis, emailing(), **options) as h:
            await prompted(telegram, h)
            assert health.loops["reoffers"] is offers.heartbeat
            await until(lambda: len(telegram.chat(ANA)) == 1 and len(telegram.chat(CARA)) == 1)
            await until(lambda: offers.heartbeat.state == "ok")
            assert await offers.work.count() == 0
        assert offers.heartbeat.state == "stopped"  # ended with the runtime, not left running


def emailing() -> ScriptedModel:
    SENT.clear()
    return ScriptedModel([turn(call("send_email", to="bo@example.com")), reply("Sent.")])


async def prompted(telegram: FakeTelegram, harness: Harness) -> None:
    """Ana asks to email Bo: the approval goes ephemerally to her and to Cara."""
    ask(telegram, "email Bo")
    await until(lambda: len(telegram.chat(GROUP)) == 2)
    await harness.settle()
    assert [p.receiver for p in telegram.chat(GROUP)] == [ANA, CARA]


async def test_an_ephemeral_prompt_never_pressed_is_offered_where_it_will_arrive(
    redis: aioredis.Redis, telegram: FakeTelegram, offers: PromptOffers
) -> None:
    async with parley(redis, emailing(), **process(telegram, offers)) as h:
        telegram.unreachable.add(CARA)  # Cara never started a private chat with Parley
        await prompted(telegram, h)
        assert await offers.offer_due(time.time() + AFTER - 5) == 0  # not yet

        assert await offers.offer_due(time.time() + AFTER + 1) == 1  # nobody pressed in time
        (private,) = telegram.chat(ANA)
        assert len(telegram.chat(GROUP)) == 3
        visible = telegram.chat(GROUP)[2]
        assert visible.receiver is None and "bo@example.com" in visible.text
        assert private.text == visible.text
        assert [b["text"] for b in private.buttons][:2] == ["Approve", "Reject"]

        # Ana approves in her own chat: the group's request goes on, in the group
        telegram.click(private, "Approve", user_id=ANA)
        await until(lambda: any(p.text == "Sent." for p in telegram.chat(GROUP)))
        await h.settle()
    assert SENT == ["bo@example.com"]
    # every copy shows the decision and has no buttons left
    for copy in (*telegram.chat(GROUP)[:3], private):
        assert "Approved by Ana" in copy.text and copy.buttons == [], copy
    assert telegram.chat(ANA) == [private]  # nothing else went to her private chat


async def test_a_prompt_answered_in_time_is_not_offered_again(
    redis: aioredis.Redis, telegram: FakeTelegram, offers: PromptOffers
) -> None:
    async with parley(redis, emailing(), **process(telegram, offers)) as h:
        await prompted(telegram, h)
        assert await offers.work.count() == 1
        for_cara = telegram.chat(GROUP)[1]
        telegram.click(for_cara, "Approve", user_id=CARA, name="Cara", chat_type="supergroup")
        await until(lambda: any(p.text == "Sent." for p in telegram.chat(GROUP)))
        await h.settle()
        assert await offers.work.count() == 0  # the answer cancelled the offer
        assert await offers.offer_due(time.time() + AFTER + 1) == 0
        posts = [p.text for p in telegram.chat(GROUP)]
    assert SENT == ["bo@example.com"]
    assert telegram.chat(ANA) == [] and telegram.chat(CARA) == []
    assert posts[2:] == ["Sent."]


async def test_a_restart_before_the_due_time_loses_nothing_and_doubles_nothing(
    redis: aioredis.Redis,
) -> None:
    """The process that sent the prompt stops; a new one (new adapter, runtime and store on
    the same Redis) offers it again when it is due, once, and the press from the copy decides."""
    model = emailing()
    async with FakeTelegram() as telegram:
        async with parley(redis, model, **process(telegram, PromptOffers(redis, Keys()))) as h:
            await prompted(telegram, h)
        assert telegram.chat(ANA) == [] and telegram.chat(CARA) == []

        offers = PromptOffers(redis, Keys())
        async with parley(redis, model, **process(telegram, offers)) as h:
            assert await offers.offer_due(time.time() + AFTER + 1) == 1
            assert await offers.offer_due(time.time() + AFTER + 60) == 0  # once
            (for_ana,), (for_cara,) = telegram.chat(ANA), telegram.chat(CARA)
            assert "bo@example.com" in for_ana.text and for_cara.text == for_ana.text
            telegram.click(for_cara, "Approve", user_id=CARA, name="Cara")
            await until(lambda: any(p.text == "Sent." for p in telegram.chat(GROUP)))
            await h.settle()
    assert SENT == ["bo@example.com"]
    # the copies made after the restart join the prompt's edit too
    for copy in (*telegram.chat(GROUP)[:2], for_ana, for_cara):
        assert "Approved by Cara" in copy.text and copy.buttons == [], copy


async def test_two_workers_offer_a_due_prompt_once(
    redis: aioredis.Redis, telegram: FakeTelegram, offers: PromptOffers
) -> None:
    async with parley(redis, emailing(), **process(telegram, offers)) as h:
        await prompted(telegram, h)
        second = PromptOffers(redis, Keys())
        other = telegram_adapter(telegram, second)  # another worker: it only sends
        try:
            due = time.time() + AFTER + 1
            counts = await asyncio.gather(offers.offer_due(due), second.offer_due(due))
            assert sorted(counts) == [0, 1]
        finally:
            await other.stop()
    assert len(telegram.chat(ANA)) == 1 and len(telegram.chat(CARA)) == 1
    assert all(p.receiver is not None for p in telegram.chat(GROUP))  # nothing shown to all


async def test_a_worker_dying_after_the_copies_went_out_does_not_double_them(
    redis: aioredis.Redis, telegram: FakeTelegram, offers: PromptOffers
) -> None:
    """It sent the copies and died before saying so: its lease runs out, another worker
    claims the offer again, and nobody gets a second copy."""
    async with parley(redis, emailing(), **process(telegram, offers)) as h:
        await prompted(telegram, h)
        second = PromptOffers(redis, Keys())
        other = telegram_adapter(telegram, second)
        try:
            due = time.time() + AFTER + 1
            ((_, offer),) = await offers.work.claim(due)
            assert offers.deliver is not None
            await offers.deliver(offer)  # ... and the worker dies here
            assert len(telegram.chat(ANA)) == 1 and len(telegram.chat(CARA)) == 1
            assert await second.offer_due(due + 1) == 0  # still under the first one's lease
            assert await second.offer_due(due + offers.work.lease + 1) == 1
            assert await offers.work.count() == 0
        finally:
            await other.stop()
    assert len(telegram.chat(ANA)) == 1 and len(telegram.chat(CARA)) == 1


async def test_the_copy_goes_only_to_the_people_the_prompt_is_for(
    redis: aioredis.Redis, telegram: FakeTelegram, offers: PromptOffers
) -> None:
    """Break it: Bob is in the group but the prompt is not his; he gets no copy, and a press
    from Ana's copy by Bob is refused."""
    async with parley(redis, emailing(), **process(telegram, offers)) as h:
        await prompted(telegram, h)
        ((_, offer),) = await offers.work.every()
        assert offer.receivers == [ANA, CARA]
        assert await offers.offer_due(time.time() + AFTER + 1) == 1
        assert telegram.chat(BOB) == []
        assert [p.receiver for p in telegram.chat(GROUP)] == [ANA, CARA]  # no visible copy
        (private,) = telegram.chat(ANA)
        telegram.click(private, "Approve", user_id=BOB, name="Bob")
        await until(lambda: len(telegram.method_calls("answerCallbackQuery")) == 1)
        await h.settle()
        refusal = telegram.method_calls("answerCallbackQuery")[0].body["text"]
    assert "Only Ana" in refusal and SENT == []


async def test_telegram_failing_at_the_due_time_leaves_the_copy_for_a_later_pass(
    redis: aioredis.Redis, telegram: FakeTelegram, offers: PromptOffers
) -> None:
    """Break it: Telegram answers 502 when Ana's copy is due; it goes out on a later pass,
    once, and Cara's (which went through the first time) is not sent again."""
    async with parley(redis, emailing(), **process(telegram, offers)) as h:
        await prompted(telegram, h)
        due = time.time() + AFTER + 1
        assert (await offers.work.every())[0][1].receivers == [ANA, CARA]  # Ana's goes first
        telegram.answer_error("sendMessage", 502, "Bad Gateway")  # Ana's, the first
        assert await offers.offer_due(due) == 1
        telegram.errors.clear()
        assert telegram.chat(ANA) == [] and len(telegram.chat(CARA)) == 1
        assert await offers.work.count() == 1  # kept for a later pass
        assert await offers.offer_due(due + 1) == 0  # not before RETRY
        assert await offers.offer_due(due + RETRY + 1) == 1
        assert len(telegram.chat(ANA)) == 1 and len(telegram.chat(CARA)) == 1
        assert await offers.work.count() == 0
        assert await offers.offer_due(due + 10 * RETRY) == 0


async def test_an_unreadable_offer_is_dropped_and_counted_and_the_others_go_out(
    redis: aioredis.Redis, telegram: FakeTelegram, offers: PromptOffers
) -> None:
    """Break it: a record no one can read (a bad write, an older shape) fails no pass."""
    async with parley(redis, emailing(), **process(telegram, offers)) as h:
        await prompted(telegram, h)
        await redis.set("parley:reoffer:garbage", b'{"ref": 12, "receivers": "all"}')
        await redis.zadd("parley:{reoffers}:due", {"garbage": 0})
        dropped = metrics.DUE_UNREADABLE.labels("prompt re-offer")._value.get()
        assert await offers.offer_due(time.time() + AFTER + 1) == 1
        assert metrics.DUE_UNREADABLE.labels("prompt re-offer")._value.get() == dropped + 1
        assert await redis.get("parley:reoffer:garbage") is None
        assert await offers.work.count() == 0
    assert len(telegram.chat(ANA)) == 1 and len(telegram.chat(CARA)) == 1


@pytest.mark.network
async def test_a_redis_outage_while_an_offer_is_due_delays_it_and_it_comes_once(
    tmp_path: Path,
) -> None:
    """The worker's loop meets Redis gone when the offer is due: the loop degrades and keeps
    trying; once Redis is back the copy goes out, once."""
    async with private_redis(tmp_path) as server, FakeTelegram() as telegram:
        client = server.client()
        health = Health()
        offers = PromptOffers(client, Keys(), poll=0.05, health=health)
        adapter = telegram_adapter(telegram, offers)
        adapter.reoffers.after = 0.2
        group = ConversationKey(platform="telegram", chat_id=str(GROUP))
        prompt = OutboundMessage(
            text="Email bo@example.com?",
            buttons=(
                Button(label="Approve", value="approve"),
                Button(label="Reject", value="reject"),
            ),
            decision_id="dec1",
            audience=(str(ANA),),
        )
        stop = asyncio.Event()
        loop: asyncio.Task[None] | None = None
        try:
            await adapter.send(group, prompt)  # ephemeral to Ana; the offer is due in 0.2 s
            assert [p.receiver for p in telegram.chat(GROUP)] == [ANA]
            await server.down()
            loop = asyncio.create_task(offers.run(stop))
            health.watch(offers.heartbeat, loop)
            await until(lambda: offers.heartbeat.state == "degraded")
            assert telegram.chat(ANA) == []
            await server.up()
            await until(lambda: len(telegram.chat(ANA)) == 1)
            await until(lambda: offers.heartbeat.state == "ok")
            await asyncio.sleep(0.3)  # a few more passes: nothing more
            assert await offers.work.count() == 0
        finally:
            stop.set()
            if loop is not None:
                await loop
            await adapter.stop()
            await client.aclose()
    (copy,) = telegram.chat(ANA)
    assert "bo@example.com" in copy.text and [b["text"] for b in copy.buttons] == [
        "Approve",
        "Reject",
    ]


async def test_the_service_keeps_offers_in_redis_unless_re_offers_are_off(
    redis: aioredis.Redis,
) -> None:
    def platforms(after: float) -> Platforms:
        telegram = {"TELEGRAM_BOT_TOKEN": "1:token", "PARLEY_TELEGRAM_REOFFER_AFTER": after}
        return Platforms(Settings.load(env_file=None, telegram=telegram), redis, Keys(), None)

    on, off = platforms(AFTER), platforms(0)
    assert isinstance(on.offers, PromptOffers) and on.telegram is not None
    assert on.telegram.reoffers.store is on.offers
    assert on.offers.deliver == on.telegram.reoffers.offer
    assert off.offers is None and off.telegram is not None and off.telegram.reoffers.after == 0
    for each in (on, off):
        await each.close()
