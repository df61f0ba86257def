"""Only the requester (or a configured approver) can cancel a pending decision in a group."""

from __future__ import annotations

import redis.asyncio as aioredis

from tests.agent.scripted import ScriptedModel, call, turn
from tests.bot.harness import running, settings
from tests.bot.recording import click, dm, message
from tests.bot.test_runtime import recording_tool


async def test_another_group_member_cannot_cancel_a_pending_approval(
    redis: aioredis.Redis,
) -> None:
    registry, ran = recording_tool()
    model = ScriptedModel([turn(call("send_email", to="a@example.com"))])
    config = settings()
    config = config.model_copy(
        update={"access": config.access.model_copy(update={"approvers": ["boss"]})}
    )
    async with running(redis, model, tools=registry, config=config) as harness:
        group = dm("-100")
        await harness.submit(message(group, "email the team", direct=False))
        await harness.settle()
        approval = harness.adapter.in_conversation(group)[0]

        await harness.submit(
            message(
                group, "/cancel", command="cancel", user="mallory", name="Mallory", direct=False
            )
        )
        await harness.settle()
        assert "Only Ana or an approver can cancel" in harness.adapter.texts(group)[-1]
        assert approval.current.buttons != ()  # still pending
        assert (await harness.runtime.sessions.load(group.id)).status == "awaiting_approval"

        await harness.submit(click(group, approval, "approve"))
        await harness.settle()
        assert ran == ["a@example.com"]


async def test_an_approver_may_cancel_for_the_requester(redis: aioredis.Redis) -> None:
    registry, ran = recording_tool()
    model = ScriptedModel([turn(call("send_email", to="a@example.com"))])
    config = settings()
    config = config.model_copy(
        update={"access": config.access.model_copy(update={"approvers": ["boss"]})}
    )
    async with running(redis, model, tools=registry, config=config) as harness:
        group = dm("-100")
        await harness.submit(message(group, "email the team", direct=False))
        await harness.settle()
        approval = harness.adapter.in_conversation(group)[0]
        await harness.submit(
            message(group, "/cancel", command="cancel", user="boss", name="Boss", direct=False)
        )
        await harness.settle()
        assert "Cancelled by Boss" in approval.current.text
        assert (await harness.runtime.sessions.load(group.id)).status == "idle"
        assert ran == []
