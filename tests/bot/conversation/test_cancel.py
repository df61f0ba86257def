"""Only the requester (or a configured approver) can cancel a pending decision in a group."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import redis.asyncio as aioredis

from tests.agent.scripted import ScriptedModel, call, turn
from tests.bot.harness import Harness, email_tool, prompted, running, settings, with_approvers
from tests.bot.recording import Posted, click, dm, message

GROUP = dm("-100")


@contextlib.asynccontextmanager
async def approval_pending(
    redis: aioredis.Redis,
) -> AsyncIterator[tuple[Harness, Posted, list[str]]]:
    """Ana asked, in a group, for an email that now waits for approval; Boss is an approver."""
    registry, ran = email_tool()
    model = ScriptedModel([turn(call("send_email", to="a@example.com"))])
    config = with_approvers(settings(), "boss")
    async with running(redis, model, tools=registry, config=config) as harness:
        yield harness, await prompted(harness, GROUP, "email the team", direct=False), ran


async def cancel(harness: Harness, user: str, name: str) -> None:
    await harness.submit(
        message(GROUP, "/cancel", command="cancel", user=user, name=name, direct=False)
    )
    await harness.settle()


async def test_another_group_member_cannot_cancel_a_pending_approval(
    redis: aioredis.Redis,
) -> None:
    async with approval_pending(redis) as (harness, approval, ran):
        await cancel(harness, "mallory", "Mallory")
        assert "Only Ana or an approver can cancel" in harness.adapter.texts(GROUP)[-1]
        assert approval.current.buttons != ()  # still pending
        assert (await harness.runtime.sessions.load(GROUP.id)).status == "awaiting_approval"

        await harness.submit(click(GROUP, approval, "approve"))
        await harness.settle()
        assert ran == ["a@example.com"]


async def test_an_approver_may_cancel_for_the_requester(redis: aioredis.Redis) -> None:
    async with approval_pending(redis) as (harness, approval, ran):
        await cancel(harness, "boss", "Boss")
        assert "Cancelled by Boss" in approval.current.text
        assert (await harness.runtime.sessions.load(GROUP.id)).status == "idle"
        assert ran == []
