"""What the runtime reads and writes in Redis around a run, and when: a new run's session is
stored once, when the run is over (a crash before that replays the entry from the stored
session); nothing is read back on an entry's first delivery; and the answer's outbox record
goes with the session save."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import pytest
import redis as syncredis
import redis.asyncio as aioredis

from agent.messages import ChatRequest, ChatResponse
from bot.runtime.sessions import Session
from tests.agent.scripted import ScriptedModel, reply
from tests.bot.harness import running
from tests.bot.recording import dm, message
from tests.bot.test_delivery import ANA, CONVERSATION, bot, texts, until
from tests.fakes.telegram import FakeTelegram


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


async def test_a_new_run_stores_its_session_only_once_it_is_over(
    redis: aioredis.Redis, redis_url: str
) -> None:
    chat = dm()
    stored_during_runs: list[Session] = []
    reader = syncredis.Redis.from_url(redis_url)

    def answer(request: ChatRequest) -> ChatResponse:
        raw = reader.get(f"parley:conv:{{{chat.id}}}:session")
        stored_during_runs.append(Session.model_validate_json(raw) if raw else Session())
        return reply(f"re: {request.messages[-1].text}")

    model = ScriptedModel([answer, answer])
    try:
        async with running(redis, model) as harness:
            await harness.submit(message(chat, "first"))
            await harness.settle()
            first = await harness.runtime.sessions.load(chat.id)
            await harness.submit(message(chat, "second"))
            await harness.settle()
            second = await harness.runtime.sessions.load(chat.id)
    finally:
        reader.close()
    assert harness.adapter.texts(chat) == ["re: first", "re: second"]
    # While the second run worked, Redis still held what the first one left.
    assert stored_during_runs[0].status == "idle" and stored_during_runs[0].state is None
    assert stored_during_runs[1].model_dump() == first.model_dump()
    assert first.last_entry is not None and second.last_entry is not None
    assert second.last_entry != first.last_entry and second.status == "idle"


async def test_a_first_delivery_reads_nothing_back_and_records_its_answer_with_the_session(
    redis: aioredis.Redis, redis_url: str, telegram: FakeTelegram
) -> None:
    async with bot(redis, telegram, ScriptedModel([reply("Hello Ana!")])) as harness:
        async with monitored(redis_url) as commands:
            telegram.push(telegram.message(chat_id=ANA, user_id=ANA, text="hi"))
            await until(lambda: bool(telegram.chat(ANA)))
            await harness.settle()
            await asyncio.sleep(0.3)  # the monitor's last lines
        [(entry, _)] = await redis.xrange(harness.runtime.keys.inbox)
        record = await redis.get(harness.runtime.keys.outbox(f"{entry.decode()}:outcome"))
        assert record == json.dumps(str(telegram.chat(ANA)[0].message_id)).encode()
        session = await harness.runtime.sessions.load(CONVERSATION)
        assert session.last_entry == entry.decode()
    assert texts(telegram) == ["Hello Ana!"]
    # The session came with the lock, and a streamed answer on its first delivery cannot
    # meet what an earlier attempt left under its outbox key: neither is read on its own.
    reads = [c for c in commands if c.startswith("GET ")]
    assert any(c.startswith("SET parley:outbox:") for c in commands)
    assert not [c for c in reads if "outbox" in c or "session" in c], reads


@contextlib.asynccontextmanager
async def monitored(redis_url: str) -> AsyncIterator[list[str]]:
    """The commands clients send while the block runs (not those scripts run)."""
    client = aioredis.Redis.from_url(redis_url)
    seen: list[str] = []
    async with client.monitor() as monitor:

        async def collect() -> None:
            async for command in monitor.listen():
                if command.get("client_type") != "lua":
                    seen.append(str(command["command"]))

        task = asyncio.create_task(collect())
        try:
            yield seen
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    await client.aclose()
