"""Stop means stop: a /cancel (or a platform's stop button) reaches the running run at its next
step boundary instead of waiting behind it; a model call in flight is abandoned, an approved
action already running finishes and is reported, and nothing runs after the stop. Only the
requester (or an approver, in a shared chat) may stop a run."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from agent.messages import ChatRequest, ChatResponse
from agent.tools import ToolRegistry, tool
from bot.wiring.connection import redis_client
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import Harness, prompted, running, settings, with_approvers
from tests.bot.recording import click, dm, message
from tests.private_redis import private_redis

GROUP = dm("-100")


class Hanging(ScriptedModel):
    """Plays its script, but the call numbered `hang_at` waits until cancelled."""

    def __init__(self, *script: object, hang_at: int = 1) -> None:
        super().__init__(script)  # type: ignore[arg-type]
        self.hang_at = hang_at
        self.hanging = asyncio.Event()
        self.abandoned = 0

    async def complete(self, request: ChatRequest) -> ChatResponse:
        if len(self.turn_requests) + 1 == self.hang_at:
            self.requests.append(request)
            self.hanging.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                self.abandoned += 1
                raise
        return await super().complete(request)


async def stop(harness: Harness, chat: object, user: str = "42", name: str = "Ana") -> None:
    direct = chat != GROUP
    await harness.submit(
        message(chat, "/cancel", command="cancel", user=user, name=name, direct=direct)  # type: ignore[arg-type]
    )


async def test_cancel_during_a_model_call_stops_the_run_and_says_what_was_stopped(
    redis: aioredis.Redis,
) -> None:
    model = Hanging()
    async with running(redis, model) as harness:
        chat = dm()
        await harness.submit(message(chat, "write me a long essay about tides"))
        await asyncio.wait_for(model.hanging.wait(), 10)
        await stop(harness, chat)
        await harness.settle()
        texts = harness.adapter.texts(chat)
        assert texts == [
            "⏹ Stopped: “write me a long essay about tides”. Nothing more will run for it."
        ]
        assert model.abandoned == 1 and len(model.turn_requests) == 1
        session = await harness.runtime.sessions.load(chat.id)
        assert session.status == "idle"

        # The conversation goes on: the stopped request is history, answered as stopped.
        model.push(reply("Hello again."))
        await harness.submit(message(chat, "hello"))
        await harness.settle()
        assert harness.adapter.texts(chat)[-1] == "Hello again."
        history = str(model.turn_requests[-1].messages)
        assert "long essay" in history


async def test_a_stop_while_an_approved_action_runs_lets_it_finish_and_runs_nothing_after(
    redis: aioredis.Redis,
) -> None:
    ran: list[str] = []
    started = asyncio.Event()

    @tool(side_effects=True, describe=lambda args: f"Send an email to {args['to']}")
    async def send_email(to: str) -> str:
        """Send an email."""
        ran.append(f"start {to}")
        started.set()
        await asyncio.sleep(0.3)
        ran.append(f"end {to}")
        return f"sent to {to}"

    registry = ToolRegistry()
    registry.register(send_email)
    model = ScriptedModel(
        [turn(call("send_email", to="a@x.test"), call("send_email", to="b@x.test")), reply("x")]
    )
    async with running(redis, model, tools=registry) as harness:
        chat = dm()
        approval = await prompted(harness, chat, "email a and b")
        await harness.submit(click(chat, approval, "approve"))
        await asyncio.wait_for(started.wait(), 10)
        await stop(harness, chat)
        await harness.settle()
        assert ran == ["start a@x.test", "end a@x.test"]  # finished; b never started
        assert len(model.turn_requests) == 1  # no model call after the stop
        last = harness.adapter.texts(chat)[-1]
        assert last.startswith("⏹ Stopped: “email a and b”.")
        assert "Done before the stop: `send_email`." in last
        assert "Not done: `send_email`." in last
        assert "nothing to cancel" not in " ".join(harness.adapter.texts(chat))


async def test_someone_else_in_a_group_cannot_stop_the_run_but_an_approver_can(
    redis: aioredis.Redis,
) -> None:
    config = with_approvers(settings(), "boss")
    model = Hanging(reply("The summary."), hang_at=1)
    async with running(redis, model, config=config) as harness:
        await harness.submit(message(GROUP, "summarise the week", direct=False))
        await asyncio.wait_for(model.hanging.wait(), 10)
        await stop(harness, GROUP, user="mallory", name="Mallory")
        await asyncio.sleep(0.3)
        assert model.abandoned == 0  # still working
        await stop(harness, GROUP, user="boss", name="Boss")
        await harness.settle()
        texts = harness.adapter.texts(GROUP)
        assert model.abandoned == 1
        assert texts[0].startswith("⏹ Stopped: “summarise the week”.")
        # Mallory's /cancel, handled in turn, finds the run over and says who could stop it
        assert texts[1:] == ["Only Ana or an approver could stop that; it has finished now."]


@pytest.mark.process
async def test_a_stop_sent_while_redis_is_away_lands_once_it_is_back(tmp_path: Path) -> None:
    """Redis goes away while a run works: the /cancel cannot be stored (the platform would
    send it again), and once Redis is back the stop still reaches the run that works."""
    model = Hanging()
    async with private_redis(tmp_path) as server:
        client = redis_client(server.url, settings())
        try:
            config = settings(PARLEY_LOCK_LEASE=30)
            async with running(client, model, config=config) as harness:
                chat = dm()
                await harness.submit(message(chat, "summarise my inbox"))
                await asyncio.wait_for(model.hanging.wait(), 10)
                await server.down()
                with pytest.raises(Exception):  # noqa: B017 - whatever the client raises
                    await stop(harness, chat)
                await server.up()
                for _ in range(200):  # the platform's retry, until Redis takes it
                    try:
                        await stop(harness, chat)
                        break
                    except Exception:
                        await asyncio.sleep(0.05)
                await harness.settle(within=30)
                texts = harness.adapter.texts(chat)
                assert texts == ["⏹ Stopped: “summarise my inbox”. Nothing more will run for it."]
                assert model.abandoned == 1
        finally:
            await client.aclose()


def test_a_stop_handled_after_the_run_it_came_during_says_how_that_run_ended() -> None:
    from adapters.base import Actor
    from agent.protocols import RunContext
    from agent.state import RunState
    from bot.conversation.stopping import late_stop
    from bot.runtime.sessions import Session

    context = RunContext(
        conversation_id=GROUP.id,
        platform="telegram",
        user_id="42",
        chat_id="-100",
        is_direct=False,
        user_name="Ana",
    )
    ended = Session(state=RunState(context=context, objective="x"), updated_at=1000.0)
    cancel = message(GROUP, "/cancel", command="cancel", user="42", direct=False)
    during, after = "999000-0", "1000500-0"  # sent while it ran, and after it ended
    said = late_stop(ended, cancel, during, frozenset())
    assert said is not None and said.text.startswith("That had already finished")
    assert late_stop(ended, cancel, after, frozenset()) is None  # "nothing to cancel"
    other = message(GROUP, "/cancel", command="cancel", user="7", name="Mallory", direct=False)
    refused = late_stop(ended, other, during, frozenset())
    assert refused is not None and refused.text.startswith("Only Ana or an approver")
    boss = replace(other, actor=Actor(platform="telegram", user_id="boss", name="Boss"))
    said = late_stop(ended, boss, during, frozenset({"boss"}))
    assert said is not None and said.text.startswith("That had already finished")
