"""What the runtime writes to Redis around a run, and when: a new run's session is stored
once, when the run is over (a crash before that replays the entry from the stored session)."""

from __future__ import annotations

import redis as syncredis
import redis.asyncio as aioredis

from agent.messages import ChatRequest, ChatResponse
from bot.runtime.sessions import Session
from tests.agent.scripted import ScriptedModel, reply
from tests.bot.harness import running
from tests.bot.recording import dm, message


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
