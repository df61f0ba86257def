"""Approved side effects run at most once, on the real runtime and Redis: a runtime that stops
(its drain timeout elapsing) while an approved tool runs hands the run to the next one, which
reuses a finished result and never re-runs an unfinished call without asking."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

import redis.asyncio as aioredis

from agent.builtin_tools import builtin_registry
from agent.tools import ToolContext, ToolRegistry, tool
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import prompted, running, settings
from tests.bot.recording import RecordingAdapter, click, dm, message
from tests.helpers import until


@dataclass
class Mailer:
    """A side-effecting tool that records every run and can be held mid-call."""

    started: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def registry(self) -> ToolRegistry:
        @tool(side_effects=True, describe=lambda args: f"Email {args['to']}")
        async def send_email(to: str, ctx: ToolContext) -> str:
            """Send an email.

            Args:
                to: the address
            """
            self.started.append(to)
            self.keys.append(ctx.idempotency_key)
            await self.release.wait()
            self.finished.append(to)
            return f"sent to {to}"

        registry = builtin_registry()
        registry.register(send_email)
        return registry


QUICK_STOP = settings(PARLEY_DRAIN_TIMEOUT=0.2)


async def interrupted_mid_call(
    redis: aioredis.Redis, model: ScriptedModel, mailer: Mailer, adapter: RecordingAdapter
) -> None:
    """Ask, approve, and stop the runtime while the approved call runs."""
    chat = dm()
    async with running(
        redis, model, adapter=adapter, tools=mailer.registry(), config=QUICK_STOP
    ) as harness:
        prompt = await prompted(harness, chat, "email Bo")
        await harness.submit(click(chat, prompt, "approve"))
        await until(lambda: bool(mailer.started))


async def test_an_interrupted_approved_call_is_not_rerun_without_asking(
    redis: aioredis.Redis,
) -> None:
    mailer, adapter, chat = Mailer(), RecordingAdapter(), dm()
    model = ScriptedModel([turn(call("send_email", "call-1", to="bo@example.com")), reply("Sent.")])
    await interrupted_mid_call(redis, model, mailer, adapter)
    assert mailer.started == ["bo@example.com"] and mailer.finished == []

    mailer.release.set()
    async with running(redis, model, adapter=adapter, tools=mailer.registry()) as harness:
        await until(lambda: len(adapter.in_conversation(chat)) == 3)
        await harness.settle()
        assert mailer.started == ["bo@example.com"]  # not run again on its own
        notice, retry = adapter.in_conversation(chat)[1:]
        assert "can't tell whether it happened" in notice.message.text
        assert "Email bo@example.com" in notice.message.text
        assert [b.label for b in retry.message.buttons] == ["Approve", "Reject"]
        assert "Email bo@example.com" in retry.message.text
        assert not any("went wrong" in text for text in adapter.texts(chat))
        assert (await harness.runtime.sessions.load(chat.id)).status == "awaiting_approval"

        await harness.submit(click(chat, retry, "approve"))
        await harness.settle()
        assert mailer.started == ["bo@example.com"] * 2 and mailer.finished == ["bo@example.com"]
        assert mailer.keys == ["call-1", "call-1"]  # one idempotency key for both attempts
        assert adapter.texts(chat)[-1] == "Sent."
        assert "Approved by Ana" in retry.current.text
        assert (await harness.runtime.sessions.load(chat.id)).status == "idle"
        result = model.turn_requests[-1].messages[-1].tool_results[0]
        assert "sent to bo@example.com" in result.content


async def test_rejecting_the_retry_tells_the_model_it_may_have_happened(
    redis: aioredis.Redis,
) -> None:
    mailer, adapter, chat = Mailer(), RecordingAdapter(), dm()
    model = ScriptedModel(
        [turn(call("send_email", to="bo@example.com")), reply("I'll check with Bo.")]
    )
    await interrupted_mid_call(redis, model, mailer, adapter)
    async with running(redis, model, adapter=adapter, tools=mailer.registry()) as harness:
        await until(lambda: len(adapter.in_conversation(chat)) == 3)
        await harness.settle()
        retry = adapter.in_conversation(chat)[2]
        await harness.submit(click(chat, retry, "reject"))
        await harness.settle()
        assert mailer.started == ["bo@example.com"]
        assert adapter.texts(chat)[-1] == "I'll check with Bo."
        result = model.turn_requests[-1].messages[-1].tool_results[0]
        assert result.is_error and "may or may not have happened" in result.content
        assert "chose not to try it again" in result.content


async def test_a_finished_call_is_reused_when_the_answer_was_never_sent(
    redis: aioredis.Redis,
) -> None:
    mailer, adapter, chat = Mailer(), RecordingAdapter(), dm()
    mailer.release.set()
    model = ScriptedModel([turn(call("send_email", "call-7", to="bo@example.com")), reply("Sent.")])
    async with running(
        redis, model, adapter=adapter, tools=mailer.registry(), config=QUICK_STOP
    ) as harness:
        prompt = await prompted(harness, chat, "email Bo")
        model.latency = 30.0  # the model is still writing the answer when the runtime stops
        await harness.submit(click(chat, prompt, "approve"))
        await until(lambda: bool(mailer.finished) and len(model.requests) == 2)
    assert adapter.texts(chat)[1:] == []
    [journal] = [key async for key in redis.scan_iter("parley:conv:*:journal:*")]
    assert json.loads(await redis.hget(journal, "call-7"))["finished"] is True

    model.latency = 0.0
    async with running(redis, model, adapter=adapter, tools=mailer.registry()) as harness:
        await until(lambda: len(adapter.in_conversation(chat)) == 2)
        await harness.settle()
        assert mailer.started == ["bo@example.com"]  # ran once; its result was reused
        assert adapter.texts(chat)[1:] == ["Sent."]
        assert "Approved by Ana" in prompt.current.text
        result = model.turn_requests[-1].messages[-1].tool_results[0]
        assert "sent to bo@example.com" in result.content
        assert (await harness.runtime.sessions.load(chat.id)).status == "idle"


async def test_replaying_a_delivered_approval_posts_nothing_new(redis: aioredis.Redis) -> None:
    from bot.runtime.inbox import decode
    from bot.runtime.locks import ConversationLocks
    from bot.runtime.sessions import Resolution, Session

    mailer, chat = Mailer(), dm()
    mailer.release.set()
    model = ScriptedModel(
        [turn(call("send_email", to="bo@example.com")), reply("Sent."), reply("Sent.")]
    )
    async with running(redis, model, tools=mailer.registry()) as harness:
        await harness.submit(message(chat, "email Bo"))
        await harness.settle()
        waiting = await harness.runtime.sessions.load(chat.id)
        prompt = harness.adapter.in_conversation(chat)[0]
        await harness.submit(click(chat, prompt, "approve"))
        await harness.settle()
        assert harness.adapter.texts(chat)[1:] == ["Sent."]

        # As if the worker had died after every send but before storing the session:
        *_, (entry, fields) = await redis.xrange(harness.runtime.keys.inbox)
        crashed = Session.model_validate_json(waiting.model_dump_json())
        crashed.status, crashed.decision_id = "running", None
        crashed.resolving = Resolution(entry_id=entry.decode(), approved=True)
        await redis.set(harness.runtime.keys.session(chat.id), crashed.model_dump_json())
        locks = ConversationLocks(redis, harness.runtime.keys, lease=5, ttl=60)
        held = await locks.try_acquire(chat.id)
        assert held is not None
        await harness.runtime.executor.handle(entry.decode(), decode(fields[b"event"]), held)
        await locks.release(held)

        assert mailer.started == ["bo@example.com"]
        assert harness.adapter.texts(chat)[1:] == ["Sent."]  # nothing new, no apology
        session = await harness.runtime.sessions.load(chat.id)
        assert session.status == "idle" and session.last_entry == entry.decode()
