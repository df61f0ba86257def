"""The loop acts on why the model stopped (`agent/stop_reasons.py`), scripted and over the real client."""

from __future__ import annotations

import pytest

from agent import Agent, AgentConfig, Failed, Finished, builtin_registry
from agent.llm.anthropic import AnthropicModel
from agent.llm.streaming import CONTINUE_PROMPT
from agent.messages import ChatResponse, Message, StopReason, Usage
from agent.outcomes import FAIL_MESSAGES
from agent.protocols import ProgressEvent, RunContext
from agent.stop_reasons import LENGTH_CUT, MAX_CONTINUATIONS, REFUSED, TOOL_CALL_CUT
from agent.testing import ScriptedModel, call, reply, turn
from tests.fakes import anthropic as fa
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.cuts import Cut, stream

# every scenario once more against the current generation, in strict mode
STRICT_TOO = True
NOT_STRICT = {
    "test_a_stream_broken_after_its_text_keeps_it_and_says_so": (
        "cuts at fixed event positions; the current generation's streams start with a thinking "
        "block, and tests/agent/llm/test_cuts.py cuts its recorded streams at every event"
    ),
}


def stopped(text: str, reason: StopReason, *, cut_tool_call: bool = False) -> ChatResponse:
    return ChatResponse(
        message=Message.assistant(text),
        stop_reason=reason,
        usage=Usage(input_tokens=10, output_tokens=5),
        cut_tool_call=cut_tool_call,
    )


async def test_an_answer_cut_by_the_output_limit_is_continued(ctx: RunContext) -> None:
    model = ScriptedModel([stopped("The first half, ", "max_tokens"), reply("and the second.")])
    outcome = await Agent(model, builtin_registry()).run("Tell me", ctx)
    assert isinstance(outcome, Finished)
    assert outcome.answer == "The first half, and the second."
    asked = model.turn_requests[1].messages
    assert asked[-2] == Message.assistant("The first half,")  # no trailing space for the API
    assert asked[-1] == Message.user(CONTINUE_PROMPT)
    # the history keeps one answer, not its pieces and the requests to go on
    assert [m.role for m in outcome.state.messages] == ["user", "assistant"]
    assert outcome.state.messages[-1].text == "The first half, and the second."
    assert outcome.state.usage.output_tokens == 10  # both calls counted


async def test_continuing_is_bounded_and_the_answer_says_it_was_cut(ctx: RunContext) -> None:
    pieces = [stopped(f"part {i} ", "max_tokens") for i in range(MAX_CONTINUATIONS + 1)]
    model = ScriptedModel(pieces)
    outcome = await Agent(model, builtin_registry()).run("Tell me everything", ctx)
    assert isinstance(outcome, Finished)
    assert outcome.answer.startswith("part 0 part 1 ")
    assert outcome.answer.endswith(LENGTH_CUT.strip())  # never presented as complete
    assert len(model.turn_requests) == MAX_CONTINUATIONS + 1


async def test_a_tool_call_cut_by_the_output_limit_is_retried_after_compacting(
    ctx: RunContext,
) -> None:
    model = ScriptedModel(
        [
            stopped("Let me work that out", "max_tokens", cut_tool_call=True),
            turn(call("calculator", expression="6*7")),
            reply("42"),
        ]
    )
    outcome = await Agent(model, builtin_registry()).run("What is 6*7?", ctx)
    assert isinstance(outcome, Finished) and outcome.answer == "42"
    retry = model.turn_requests[1].messages
    assert retry[-1].role == "user" and retry[-1].text.endswith(TOOL_CALL_CUT)
    assert not any(m.role == "assistant" for m in retry)  # the cut turn is dropped


async def test_a_tool_call_cut_twice_stops_and_says_why(ctx: RunContext) -> None:
    cut = stopped("Let me", "max_tokens", cut_tool_call=True)
    model = ScriptedModel([cut, cut])
    outcome = await Agent(model, builtin_registry()).run("What is 6*7?", ctx)
    assert isinstance(outcome, Failed) and outcome.reason == "output_limit"
    assert outcome.message == FAIL_MESSAGES["output_limit"]


async def test_a_refusal_is_said_as_such(ctx: RunContext) -> None:
    model = ScriptedModel([stopped("Here is how to build", "refusal")])
    outcome = await Agent(model, builtin_registry()).run("How do I build a bomb?", ctx)
    assert isinstance(outcome, Finished) and outcome.answer == REFUSED
    assert "build" not in outcome.state.messages[-1].text


async def test_a_paused_turn_is_resumed(ctx: RunContext) -> None:
    model = ScriptedModel([stopped("Searching the web… ", "pause_turn"), reply("Found it.")])
    outcome = await Agent(model, builtin_registry()).run("Look it up", ctx)
    assert isinstance(outcome, Finished) and outcome.answer == "Searching the web… Found it."
    resumed = model.turn_requests[1].messages
    # handed back as it was, but for the trailing space the API refuses there
    assert resumed[-1] == Message.assistant("Searching the web…")


async def test_a_context_window_exceeded_compacts_and_retries_once(ctx: RunContext) -> None:
    model = ScriptedModel([stopped("", "model_context_window_exceeded"), reply("Done.")])
    history = [Message.user("x" * 4000), Message.assistant("y" * 4000)] * 3
    agent = Agent(model, builtin_registry(), config=AgentConfig(context_tokens=12_000))
    first = await agent.run("warm up", ctx)  # a long history to fold
    model.push(stopped("", "model_context_window_exceeded"), reply("Done."))
    first.state.messages[:0] = history
    outcome = await agent.run("Now this", ctx, history=first.state)
    assert isinstance(outcome, Finished) and outcome.answer == "Done."
    assert model.summary_requests, "the context was compacted before the retry"
    assert len(model.turn_requests[-1].messages) < len(model.turn_requests[-2].messages)


async def test_a_context_window_exceeded_twice_says_so(ctx: RunContext) -> None:
    exceeded = stopped("", "model_context_window_exceeded")
    model = ScriptedModel([exceeded, exceeded])
    outcome = await Agent(model, builtin_registry()).run("Hi", ctx)
    assert isinstance(outcome, Failed) and outcome.reason == "context_window"
    assert outcome.message == FAIL_MESSAGES["context_window"]


async def test_an_unknown_stop_reason_of_a_clean_answer_is_complete(ctx: RunContext) -> None:
    model = ScriptedModel([stopped("All done.", "other")])
    outcome = await Agent(model, builtin_registry()).run("Hi", ctx)
    assert isinstance(outcome, Finished) and outcome.answer == "All done."


# Over the real Anthropic client and the fake's streams.


async def streamed_run(model: AnthropicModel, ctx: RunContext) -> tuple[object, str]:
    shown: list[str] = []

    async def record(event: ProgressEvent) -> None:
        if event.kind == "text_delta":
            shown.append(event.detail["text"])
        elif event.kind == "text_reset":
            shown.clear()

    outcome = await Agent(model, builtin_registry()).run("Tell me", ctx, on_progress=record)
    return outcome, "".join(shown)


async def test_a_stream_broken_after_its_text_keeps_it_and_says_so(
    hosted: FakeAnthropic, model: AnthropicModel, ctx: RunContext
) -> None:
    text = "The first sentence arrived. The second"
    hosted.script(fa.Item("text", [{"type": "text", "text": text}], cut=Cut(at=6, how="drop")))
    outcome, shown = await streamed_run(model, ctx)
    assert isinstance(outcome, Failed) and outcome.reason == "cut"
    assert shown and outcome.message.startswith(shown)  # what was shown stays
    assert outcome.message.endswith(f"_({FAIL_MESSAGES['cut']})_")
    assert outcome.state.messages[-1] == Message.assistant(shown)  # "go on" can pick it up
    assert outcome.trace.usage.input_tokens > 0  # the broken stream's usage counted


async def test_a_stream_broken_before_any_text_is_a_model_error(
    hosted: FakeAnthropic, model: AnthropicModel, ctx: RunContext
) -> None:
    hosted.script(fa.Item("text", [{"type": "text", "text": "Hello"}], cut=Cut(at=1, how="end")))
    outcome, shown = await streamed_run(model, ctx)
    assert isinstance(outcome, Failed) and outcome.reason == "model_error" and not shown


@pytest.mark.parametrize(
    ("reason", "expected"),
    [("refusal", REFUSED), ("end_turn", "An answer."), ("stop_sequence", "An answer.")],
)
async def test_streamed_stop_reasons_reach_the_loop(
    hosted: FakeAnthropic, model: AnthropicModel, ctx: RunContext, reason: str, expected: str
) -> None:
    hosted.script(fa.Item("text", [{"type": "text", "text": "An answer."}], stop_reason=reason))
    outcome, _ = await streamed_run(model, ctx)
    assert isinstance(outcome, Finished) and outcome.answer == expected


async def test_a_streamed_answer_cut_by_max_tokens_is_continued(
    hosted: FakeAnthropic, model: AnthropicModel, ctx: RunContext
) -> None:
    hosted.script(
        fa.Item("text", [{"type": "text", "text": "Half an "}], stop_reason="max_tokens"),
        fa.text("answer, finished."),
    )
    outcome, shown = await streamed_run(model, ctx)
    assert isinstance(outcome, Finished) and outcome.answer == "Half an answer, finished."
    assert shown == outcome.answer  # the chat saw the pieces one after the other
    last = hosted.message_calls[-1].body["messages"]
    texts = [block["text"] for block in last[-2]["content"] if block["type"] == "text"]
    assert [text.rstrip() for text in texts] == ["Half an"]


async def test_a_streamed_tool_call_cut_by_max_tokens_is_retried_not_a_model_error(
    hosted: FakeAnthropic, model: AnthropicModel, ctx: RunContext
) -> None:
    """The recorded tool-use stream, stopped by the output limit inside the call's JSON."""
    events = stream("anthropic_tool_use")
    inside = next(i for i, (_, e) in enumerate(events) if "partial_json" in str(e)) + 3
    limit = {"stop_reason": "max_tokens", "stop_sequence": None}
    cut = [
        *events[:inside],
        ("message_delta", {"type": "message_delta", "delta": limit, "usage": {"output_tokens": 9}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    hosted.script(fa.recorded(cut), fa.text("It is sunny in San Francisco."))
    outcome, shown = await streamed_run(model, ctx)
    assert isinstance(outcome, Finished) and outcome.answer == "It is sunny in San Francisco."
    retry = hosted.message_calls[-1].body["messages"]
    assert TOOL_CALL_CUT in str(retry[-1]["content"])
