"""Calls covered by an approved plan are journaled by plan step, so a replay of the run (whose
model may name the call differently) reuses the result or asks before running it again."""

from __future__ import annotations

import pytest

from agent import Agent, AwaitingApproval, Finished, RunState, builtin_registry
from agent.protocols import JournalEntry, JournalUnavailable, RunContext
from agent.testing import ScriptedModel, call, reply, turn
from agent.tools import ToolContext, ToolRegistry, tool
from tests.agent.doubles import DictJournal

PLAN = [{"tool": "send_email", "args": {"to": "ann@example.com"}}]


def mailer() -> tuple[ToolRegistry, list[tuple[str, str]]]:
    sent: list[tuple[str, str]] = []

    @tool(side_effects=True, describe=lambda a: f"Email {a['to']}")
    async def send_email(to: str, ctx: ToolContext) -> str:
        """Send an e-mail."""
        sent.append((to, ctx.idempotency_key))
        return f"sent to {to}"

    registry = builtin_registry()
    registry.register(send_email)
    return registry, sent


def roundtrip(state: RunState) -> RunState:
    return RunState.model_validate_json(state.model_dump_json())


async def proposed(ctx: RunContext, model: ScriptedModel, tools: ToolRegistry) -> RunState:
    outcome = await Agent(model, tools).run("Email Ann", ctx)
    assert isinstance(outcome, AwaitingApproval)
    return roundtrip(outcome.state)


async def test_a_replayed_covered_call_reuses_the_journaled_result(ctx: RunContext) -> None:
    tools, sent = mailer()
    journal = DictJournal()
    model = ScriptedModel(
        [
            turn(call("propose_plan", "p1", goal="Tell Ann", steps=PLAN)),
            turn(call("send_email", "e1", to="ann@example.com")),
            reply("Done."),
            # the replay: the model names the same call with a new id
            turn(call("send_email", "e9", to="ann@example.com")),
            reply("Done again."),
        ]
    )
    saved = await proposed(ctx, model, tools)
    first = await Agent(model, tools, journal=journal).resume(roundtrip(saved), approved=True)
    assert isinstance(first, Finished) and sent == [("ann@example.com", "p1.1")]

    replay = await Agent(model, tools, journal=journal).resume(roundtrip(saved), approved=True)
    assert isinstance(replay, Finished) and replay.answer == "Done again."
    assert len(sent) == 1
    result = model.turn_requests[-1].messages[-1].tool_results[0]
    assert result.tool_use_id == "e9" and "sent to ann@example.com" in result.content


async def test_an_interrupted_covered_call_is_put_to_the_user_again(ctx: RunContext) -> None:
    tools, sent = mailer()
    journal = DictJournal()
    model = ScriptedModel(
        [
            turn(call("propose_plan", "p1", goal="Tell Ann", steps=PLAN)),
            turn(call("send_email", "e1", to="ann@example.com")),
            reply("Done."),
        ]
    )
    saved = await proposed(ctx, model, tools)
    journal.entries[(saved.run_id, "p1.1")] = JournalEntry(finished=False)  # died mid-call

    outcome = await Agent(model, tools, journal=journal).resume(roundtrip(saved), approved=True)
    assert isinstance(outcome, AwaitingApproval) and sent == []
    assert [s.description for s in outcome.plan.uncertain] == ["Email ann@example.com"]

    done = await Agent(model, tools, journal=journal).resume(
        roundtrip(outcome.state), approved=True
    )
    assert isinstance(done, Finished) and done.answer == "Done."
    assert sent == [("ann@example.com", "p1.1")]  # the retry keeps the plan step's key
    assert journal.entries[(saved.run_id, "p1.1#1")].finished


class UnreachableJournal(DictJournal):
    """A journal whose store is away when a call would start."""

    async def begin(self, context: RunContext, run_id: str, call: str) -> JournalEntry | None:
        raise JournalUnavailable("store away") from ConnectionError("store away")


async def test_a_journal_that_cannot_record_the_start_stops_the_run_without_an_outcome(
    ctx: RunContext,
) -> None:
    tools, sent = mailer()
    model = ScriptedModel(
        [
            turn(call("propose_plan", "p1", goal="Tell Ann", steps=PLAN)),
            turn(call("send_email", "e1", to="ann@example.com")),
            turn(call("send_email", "e2", to="ann@example.com")),  # the replay
            reply("Done."),
        ]
    )
    saved = await proposed(ctx, model, tools)
    agent = Agent(model, tools, journal=UnreachableJournal())
    # Not a Failed run the user would be told about: the host retries once its store is back.
    with pytest.raises(JournalUnavailable) as raised:
        await agent.resume(roundtrip(saved), approved=True)
    assert isinstance(raised.value.__cause__, ConnectionError)
    assert sent == []

    replay = await Agent(model, tools, journal=DictJournal()).resume(
        roundtrip(saved), approved=True
    )
    assert isinstance(replay, Finished) and sent == [("ann@example.com", "p1.1")]
