"""The loop streams its answer as progress events (real Anthropic client, fake server)."""

from __future__ import annotations

from agent.builtin_tools import builtin_registry
from agent.llm.anthropic import AnthropicModel
from agent.loop import Agent, AgentConfig
from agent.outcomes import Finished
from agent.protocols import ProgressEvent, RunContext
from tests.fakes import anthropic as fa

# every scenario once more against the current generation, in strict mode
STRICT_TOO = True


async def run(model: AnthropicModel, ctx: RunContext, config: AgentConfig = AgentConfig()):
    events: list[ProgressEvent] = []

    async def record(event: ProgressEvent) -> None:
        events.append(event)

    agent = Agent(model, builtin_registry(), config=config)
    outcome = await agent.run("What is 6*7?", ctx, on_progress=record)
    return outcome, events


async def test_the_answer_arrives_as_text_deltas_before_the_run_ends(
    hosted, model, ctx: RunContext
) -> None:
    answer = "Six times seven is forty-two, which is the answer."
    hosted.script(fa.streamed(answer, chunk=6))
    outcome, events = await run(model, ctx)
    assert isinstance(outcome, Finished) and outcome.answer == answer
    deltas = [e.detail["text"] for e in events if e.kind == "text_delta"]
    assert len(deltas) > 3 and "".join(deltas) == answer


async def test_text_before_a_tool_call_becomes_a_status_not_the_answer(
    hosted, model, ctx: RunContext
) -> None:
    hosted.script(
        fa.tool("calculator", thought="Let me work that out.", expression="6*7"),
        fa.streamed("It is 42."),
    )
    outcome, events = await run(model, ctx)
    assert isinstance(outcome, Finished) and outcome.answer == "It is 42."
    kinds = [e.kind for e in events]
    reset = kinds.index("text_reset")
    assert events[reset].detail == {"status": "Let me work that out."}
    after = [e.detail["text"] for e in events[reset:] if e.kind == "text_delta"]
    assert "".join(after) == "It is 42."
    assert kinds.index("tool_started") > reset


async def test_streaming_off_asks_for_whole_answers(hosted, model, ctx: RunContext) -> None:
    hosted.script(fa.streamed("Forty-two."))
    outcome, events = await run(model, ctx, AgentConfig(stream=False))
    assert isinstance(outcome, Finished) and outcome.answer == "Forty-two."
    assert not [e for e in events if e.kind == "text_delta"]
    assert "stream" not in hosted.message_calls[-1].body
