"""Redis goes away at awkward moments: while an approved call is being journaled, while an
answer streams, while the limits are flushed at stop, while a memory is kept or forgotten.
Each time nothing is lost or done twice, and the conversation works once Redis is back.
A private Redis Stack server is stopped and started again on the same port."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from typing import Any

import pytest
import redis.asyncio as aioredis

from agent.builtin_tools import builtin_registry
from agent.messages import ChatRequest, ChatResponse, ToolResultBlock
from agent.protocols import JournalEntry, RunContext
from agent.tools import ToolRegistry
from bot.conversation.limits import Limits
from bot.runtime.journal import RedisToolJournal
from memory import RedisMemoryStore, local_embedder, open_store
from tests.adapters.test_telegram import SENT, send_email
from tests.adapters.test_telegram_stream import ANA, ANSWER, GROUP
from tests.adapters.test_telegram_stream import bot as streaming_bot
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import Harness, running, settings
from tests.bot.recording import RecordingAdapter, click, dm, message
from tests.fakes import anthropic as fa
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.helpers import until
from tests.private_redis import PrivateRedis

pytestmark = pytest.mark.network

TASKS: set[asyncio.Future[None]] = set()  # servers started again in the background


def tools() -> ToolRegistry:
    registry = builtin_registry()
    registry.register(send_email)
    return registry


@pytest.fixture
def store(
    stoppable: tuple[PrivateRedis, aioredis.Redis],
) -> tuple[PrivateRedis, aioredis.Redis]:
    SENT.clear()
    return stoppable


async def all_loops_ok(harness: Harness) -> None:
    """Every loop the outage touched says it is back before the runtime stops."""
    loops = harness.runtime.health.loops.values()
    await until(lambda: all(loop.state == "ok" for loop in loops))


def assert_one_degradation_each(caplog: pytest.LogCaptureFixture) -> None:
    lines = [r.getMessage() for r in caplog.records if r.name == "bot.ops.health"]
    loops = {line.split()[0] for line in lines}
    assert "worker" in loops, lines
    for loop in loops:
        degraded = [line for line in lines if line.startswith(f"{loop} degraded")]
        recovered = [line for line in lines if line.startswith(f"{loop} recovered after")]
        assert len(degraded) == len(recovered) == 1, (loop, lines)


class OutageAtBegin(RedisToolJournal):
    """The real journal, with Redis stopped just as the first `begin` is sent."""

    def __init__(self, journal: RedisToolJournal, server: PrivateRedis) -> None:
        super().__init__(journal.redis, journal.keys, ttl=journal.ttl_ms / 1000)
        self.server = server
        self.outages = 0

    async def begin(self, context: RunContext, run_id: str, call: str) -> JournalEntry | None:
        if not self.outages:
            self.outages += 1
            await self.server.down()
            later = asyncio.get_running_loop().call_later
            later(2, lambda: TASKS.add(asyncio.ensure_future(self.server.up())))
        return await super().begin(context, run_id, call)


async def test_redis_away_while_an_approved_call_is_journaled(
    store: tuple[PrivateRedis, aioredis.Redis], caplog: pytest.LogCaptureFixture
) -> None:
    server, client = store
    caplog.set_level(logging.INFO)
    chat = dm()
    model = ScriptedModel(
        [turn(call("send_email", to="bo@example.com")), reply("Sent."), reply("Still here.")]
    )
    adapter = RecordingAdapter()
    async with running(client, model, adapter=adapter, tools=tools()) as harness:
        journal = harness.runtime.executor.agent.journal
        assert isinstance(journal, RedisToolJournal)
        outage = OutageAtBegin(journal, server)
        harness.runtime.executor.agent.journal = outage
        await harness.submit(message(chat, "email Bo"))
        await harness.settle()
        prompt = adapter.in_conversation(chat)[0]
        await harness.submit(click(chat, prompt, "approve"))
        await until(lambda: "Sent." in adapter.texts(chat), within=60)
        await harness.settle(within=30)
        await harness.submit(message(chat, "are you ok?"))
        await until(lambda: "Still here." in adapter.texts(chat))
        await harness.settle()
        await all_loops_ok(harness)
    assert outage.outages == 1
    assert SENT == ["bo@example.com"]  # once, after Redis was back
    assert adapter.texts(chat)[1:] == ["Sent.", "Still here."]
    assert_one_degradation_each(caplog)
    # the run stopped without an outcome rather than failing: nothing to tell the user
    assert not [r for r in caplog.records if r.name == "agent.loop" and "failed" in r.message]


async def test_redis_away_as_a_streamed_answer_first_shows(
    store: tuple[PrivateRedis, aioredis.Redis], caplog: pytest.LogCaptureFixture
) -> None:
    # The first piece is posted, but the marker naming it cannot be stored, nor can the
    # answer be finished: the entry is handled again once Redis is back.
    server, client = store
    caplog.set_level(logging.INFO, logger="bot")
    async with FakeTelegram() as telegram, FakeAnthropic() as hosted:
        # the first piece is shown after the first-show hold, well before the second comes
        hosted.script(fa.streamed(ANSWER, pace=1.5, chunk=80), fa.streamed(ANSWER, pace=0.01))
        hosted.script(fa.Item("text", [{"type": "text", "text": "Still here."}]))

        async def outage() -> None:
            await server.down()
            later = asyncio.get_running_loop().call_later
            later(3, lambda: TASKS.add(asyncio.ensure_future(server.up())))

        telegram.before["sendMessage"] = outage
        async with streaming_bot(client, telegram, hosted) as (harness, _):
            telegram.push(
                telegram.message(
                    chat_id=GROUP, user_id=ANA, text="@parley_bot hi", chat_type="group"
                )
            )
            await until(lambda: ANSWER in [p.text for p in telegram.chat(GROUP)], within=60)
            await harness.settle(within=30)
            telegram.push(
                telegram.message(
                    chat_id=GROUP, user_id=ANA, text="@parley_bot ok?", chat_type="group"
                )
            )
            await until(lambda: "Still here." in [p.text for p in telegram.chat(GROUP)])
            await harness.settle()
            await all_loops_ok(harness)
    # the half message no replay could know of was taken back; the answer arrived once
    assert [p.text for p in telegram.chat(GROUP)] == [ANSWER, "Still here."]
    assert [p.text for p in telegram.deleted] == [ANSWER[:80]]
    assert_one_degradation_each(caplog)


async def test_redis_away_as_the_limits_are_flushed(
    store: tuple[PrivateRedis, aioredis.Redis], caplog: pytest.LogCaptureFixture
) -> None:
    server, client = store
    caplog.set_level(logging.INFO, logger="bot.conversation.limits")
    limits = Limits(client, "parley", settings().limits)
    everyone = f"parley:usage:{limits._day()}:*all*"
    await limits.charge("telegram:42", 100)  # written at once: the first charge
    await server.down()
    for _ in range(3):  # runs go on while Redis is away: their charges are kept
        limits.flush_every = 0.0
        await limits.charge("telegram:42", 10)
    # the process stops while Redis is still away; Redis is back a second later
    later = asyncio.get_running_loop().call_later
    later(1, lambda: TASKS.add(asyncio.ensure_future(server.up())))
    started = time.monotonic()
    assert await limits.flush_at_stop(within=20)
    assert time.monotonic() - started < 20
    assert int(await client.get(everyone)) == 130  # nothing lost, nothing counted twice
    assert int(await client.get(f"parley:usage:{limits._day()}:telegram:42")) == 130
    lines = [r.getMessage() for r in caplog.records if r.name == "bot.conversation.limits"]
    assert lines == [
        "token charges cannot be written (Redis away); kept for later",
        "token charges are written again",
    ]

    # Redis away for longer than the stop may take: bounded, and said once
    await limits.charge("telegram:42", 5)
    await server.down()
    limits.flush_every = 3600
    await limits.charge("telegram:42", 7)
    started = time.monotonic()
    assert not await limits.flush_at_stop(within=1)
    assert time.monotonic() - started < 5
    said = [r.getMessage() for r in caplog.records if r.name == "bot.conversation.limits"]
    assert said[-1] == (
        "could not write the last token charges (ConnectionError); 7 tokens not counted"
    )
    await server.up()


class OutageOnce:
    """The real memory store, with Redis stopped as the named call starts (the first time)."""

    def __init__(self, store: RedisMemoryStore, server: PrivateRedis, method: str) -> None:
        self.store = store
        self.server = server
        self.method = method
        self.outages = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.store, name)

    async def _maybe_outage(self, method: str) -> None:
        if method == self.method and not self.outages:
            self.outages += 1
            await self.server.down()
            later = asyncio.get_running_loop().call_later
            later(2, lambda: TASKS.add(asyncio.ensure_future(self.server.up())))

    async def remember(self, *args: Any, **kwargs: Any) -> Any:
        await self._maybe_outage("remember")
        return await self.store.remember(*args, **kwargs)

    async def forget(self, *args: Any, **kwargs: Any) -> Any:
        await self._maybe_outage("forget")
        return await self.store.forget(*args, **kwargs)


def remembering(request: ChatRequest) -> ChatResponse:
    """Remember what the user said, then say so; anything else is answered plainly."""
    last = request.messages[-1]
    if any(isinstance(block, ToolResultBlock) for block in last.content):
        return reply("Noted.")
    if last.text.startswith("remember"):
        return turn(call("remember", text="Ana drinks green tea"))
    return reply("Still here.")


@pytest.mark.parametrize("moment", ["remember", "forget"])
async def test_redis_away_as_a_memory_is_kept_or_forgotten(
    store: tuple[PrivateRedis, aioredis.Redis], moment: str, caplog: pytest.LogCaptureFixture
) -> None:
    server, client = store
    caplog.set_level(logging.INFO, logger="bot")
    memory = OutageOnce(await open_store(client, local_embedder()), server, moment)
    chat = dm()
    context = RunContext(
        conversation_id=chat.id, platform="telegram", user_id="42", chat_id="42", is_direct=True
    )
    adapter = RecordingAdapter()
    model = ScriptedModel([remembering] * 8)
    async with running(client, model, adapter=adapter, memory=memory) as harness:  # type: ignore[arg-type]
        await harness.submit(message(chat, "remember that I drink green tea"))
        await until(lambda: "Noted." in adapter.texts(chat), within=60)
        await harness.settle(within=30)
        kept = (await memory.store.list_memories(context)).records
        assert [m.text for m in kept] == ["Ana drinks green tea"]  # once
        await harness.submit(message(chat, "", command="memories"))
        await until(lambda: any(p.message.buttons for p in adapter.in_conversation(chat)))
        await harness.settle()
        listing = next(p for p in adapter.in_conversation(chat) if p.message.buttons)
        await harness.submit(replace(click(chat, listing, kept[0].id), is_direct=True))
        await until(lambda: "Forgotten." in adapter.texts(chat), within=60)
        await harness.settle(within=30)
        await harness.submit(message(chat, "are you ok?"))
        await until(lambda: "Still here." in adapter.texts(chat))
        await harness.settle()
        await all_loops_ok(harness)
    assert memory.outages == 1
    assert_one_degradation_each(caplog)
    assert not (await memory.store.list_memories(context)).records
    texts = adapter.texts(chat)
    assert texts.count("Noted.") == 1 and texts.count("Forgotten.") == 1
    assert texts[-1] == "Still here."
