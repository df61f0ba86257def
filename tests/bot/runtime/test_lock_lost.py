"""A worker loses its conversation lock in the middle of a run (the lease ran out while it was
stalled) and another worker takes the conversation over: one answer, the one the session
keeps, and the next message works. Two runtimes on the real Redis share a scripted model."""

from __future__ import annotations

import asyncio
import logging

import pytest
import redis.asyncio as aioredis

from agent.messages import ChatRequest, ChatResponse
from bot.runtime.keys import Keys
from bot.runtime.sessions import Session
from tests.agent.scripted import ScriptedModel, is_summary_request, reply
from tests.bot.harness import running
from tests.bot.recording import RecordingAdapter, dm, message
from tests.helpers import until

KEYS = Keys()


class GatedModel(ScriptedModel):
    """Answers "answer N" to the Nth think step; the first two wait to be let go."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = [asyncio.Event() for _ in range(3)]
        self.release = [asyncio.Event() for _ in range(2)]

    async def complete(self, request: ChatRequest) -> ChatResponse:
        if is_summary_request(request):
            return await super().complete(request)
        self.requests.append(request)
        number = len(self.turn_requests)
        self.entered[number - 1].set()
        if number <= len(self.release):
            await self.release[number - 1].wait()
        return reply(f"answer {number}")


async def test_a_run_that_lost_its_lock_is_stopped_and_the_new_holder_answers_once(
    redis: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bot.runtime")
    chat = dm()
    model = GatedModel()
    first_out, second_out = RecordingAdapter(), RecordingAdapter()
    async with running(redis, model, adapter=first_out) as first:
        await first.submit(message(chat, "what's the plan?"))
        await asyncio.wait_for(model.entered[0].wait(), 30)
        # The worker stalls past its lease: the lock runs out (as an expiry would) mid-run.
        assert await redis.delete(KEYS.lock(chat.id)) == 1
        async with running(redis, model, adapter=second_out) as second:
            # A worker reclaims the entry, takes the lock and runs it again.
            await asyncio.wait_for(model.entered[1].wait(), 30)
            await until(lambda: "lost the lock of" in caplog.text)
            model.release[0].set()  # the stale run would finish first...
            await asyncio.sleep(1)
            model.release[1].set()  # ...and then the new holder's
            await until(lambda: bool(first_out.texts() + second_out.texts()))
            await first.settle()
            await second.settle()
            await second.submit(message(chat, "are you ok?"))
            await until(lambda: len(first_out.texts() + second_out.texts()) == 2)
            await first.settle()
            await second.settle()

    assert "lost while handling" in caplog.text  # the stale run was stopped
    seen = first_out.texts() + second_out.texts()
    raw = await redis.get(KEYS.session(chat.id))
    session = Session.model_validate_json(raw)
    assert session.status == "idle" and session.state is not None
    kept = [(m.role, m.text) for m in session.state.messages]
    # what the user saw is what the conversation remembers, once each
    assert sorted(seen) == ["answer 2", "answer 3"], seen  # from either worker
    assert kept == [
        ("user", "what's the plan?"),
        ("assistant", "answer 2"),
        ("user", "are you ok?"),
        ("assistant", "answer 3"),
    ], kept
