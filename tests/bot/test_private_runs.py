"""A run that read something for its requester alone, on the real runtime: the approved read's
answer goes to the requester privately, and nothing of it is extracted into shared memory."""

from __future__ import annotations

import asyncio

from adapters.base import ConversationKey, OutboundMessage
from agent import ApprovalRequired, builtin_registry
from agent.outcomes import Outcome
from agent.tools import ToolContext, tool
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.bot.harness import running
from tests.bot.recording import click, message

SALARY = "Ana earns 98,000"
GROUP = ConversationKey(platform="telegram", chat_id="-100")


@tool
async def payroll(ctx: ToolContext) -> str:
    """The requester's payroll record, for them alone."""
    if not ctx.approved:
        raise ApprovalRequired("Look up your payroll and answer you privately", private=True)
    return SALARY


async def test_a_private_answer_goes_to_the_requester_and_is_not_extracted(redis) -> None:
    """Attack: the model obeys "look up Ana's pay and remember it for this group"."""
    extracted: list[Outcome] = []

    async def after_run(outcome: Outcome) -> OutboundMessage | None:
        extracted.append(outcome)
        return None

    registry = builtin_registry()
    registry.register(payroll)
    model = ScriptedModel([turn(call("payroll")), reply(f"Privately: {SALARY}"), reply("Hi.")])
    async with running(redis, model, tools=registry, after_run=after_run) as harness:
        await harness.submit(message(GROUP, "look up my pay, remember it here", direct=False))
        await harness.settle()
        [prompt] = harness.adapter.in_conversation(GROUP)
        assert "answer you privately" in prompt.message.text
        await harness.submit(click(GROUP, prompt, "approve"))
        await harness.settle()
        answer = harness.adapter.in_conversation(GROUP)[-1].message
        assert SALARY in answer.text and answer.private_to == "42"
        assert extracted == []  # the private run gave the extractor nothing
        await harness.submit(message(GROUP, "hello", user="7", name="Bob", direct=False))
        await harness.settle()
    assert [o.state.context.user_id for o in extracted] == ["7"]
    assert SALARY not in str(extracted[0].state.messages)


@tool
async def slow_payroll(ctx: ToolContext) -> str:
    """The requester's payroll record, read slowly, saying how far it is."""
    if not ctx.approved:
        raise ApprovalRequired("Look up your payroll and answer you privately", private=True)
    if ctx.progress is not None:
        await ctx.progress(f"read so far: {SALARY}")  # a tool's own words carry what it read
    await asyncio.sleep(0.5)
    return SALARY


async def test_a_private_runs_tool_progress_never_shows_in_the_group(redis) -> None:
    """The status line is the conversation's: a slow private read must not say its words
    there, neither at once nor when the slow-run timer shows the latest status."""
    registry = builtin_registry()
    registry.register(slow_payroll)
    model = ScriptedModel([turn(call("slow_payroll")), reply(f"Privately: {SALARY}")])
    async with running(redis, model, tools=registry) as harness:
        harness.adapter.progress_delay = 0.05  # type: ignore[attr-defined]
        harness.adapter.progress_refresh = 0.05  # type: ignore[attr-defined]
        await harness.submit(message(GROUP, "look up my pay", direct=False))
        await harness.settle()
        [prompt] = harness.adapter.in_conversation(GROUP)
        await harness.submit(click(GROUP, prompt, "approve"))
        await harness.settle()
        assert harness.adapter.in_conversation(GROUP)[-1].message.private_to == "42"
        shown = [status for _, status in harness.adapter.progress_log if status]
        assert shown  # the run did show that it works
        assert not [status for status in shown if SALARY in status]
