from __future__ import annotations

from agent import Agent, AgentConfig, Finished, RunState, builtin_registry
from agent.context import CONTINUATION, estimate_request
from agent.messages import ChatRequest, Message, TextBlock, ToolResultBlock, ToolUseBlock
from agent.protocols import RunContext
from agent.testing import ScriptedModel, call, reply, turn


def long_thread(ctx: RunContext, turns: int) -> RunState:
    """A finished conversation of `turns` exchanges; every third one used a tool."""
    messages: list[Message] = []
    for i in range(turns):
        messages.append(Message.user(f"Turn {i}: what about item {i}? " + "details " * 20))
        if i % 3 == 0:
            messages.append(
                Message(
                    role="assistant",
                    content=[
                        TextBlock(text=f"Checking item {i}."),
                        ToolUseBlock(id=f"u{i}", name="calculator", input={"expression": f"{i}*2"}),
                    ],
                )
            )
            messages.append(
                Message(
                    role="user", content=[ToolResultBlock(tool_use_id=f"u{i}", content=str(i * 2))]
                )
            )
        messages.append(Message.assistant(f"Item {i} is fine. " + "because " * 20))
    return RunState(context=ctx, objective="old", messages=messages)


def pairs_intact(messages: list[Message]) -> bool:
    if messages[0].role != "user" or messages[0].tool_results:
        return False
    for index, message in enumerate(messages):
        for result in message.tool_results:
            previous = messages[index - 1]
            if result.tool_use_id not in {u.id for u in previous.tool_uses}:
                return False
        if message.tool_uses:
            following = {r.tool_use_id for r in messages[index + 1].tool_results}
            if following != {u.id for u in message.tool_uses}:
                return False
    return True


async def test_200_turn_thread_stays_inside_the_window(ctx: RunContext) -> None:
    history = long_thread(ctx, 200)
    window = 3000
    full = ChatRequest(system="", messages=history.messages, tools=builtin_registry().specs())
    assert estimate_request(full) > 7 * window  # far too long to send as it is

    model = ScriptedModel(
        [turn(call("calculator", expression="6*7")) for _ in range(6)] + [reply("42")]
    )
    agent = Agent(model, builtin_registry(), config=AgentConfig(context_tokens=window))
    outcome = await agent.run("And the final item?", ctx, history=history)
    assert isinstance(outcome, Finished) and outcome.answer == "42"

    assert len(model.turn_requests) == 7
    for request in model.requests:  # turn requests and summary requests alike
        assert estimate_request(request) <= window
    for request in model.turn_requests:
        assert pairs_intact(request.messages)
        assert "<summary>\nSummary #" in request.system
        # the objective is never folded away: the newest turn, or restated in the system
        objective = "And the final item?"
        assert objective in request.system or request.messages[-1].text.endswith(objective)
        assert request.system.count(objective) + request.messages[-1].text.count(objective) == 1
    assert model.summary_requests, "old turns were folded by the model"
    assert outcome.trace.summaries == len(model.summary_requests)
    # the oldest turn went into the first summary request, the newest stayed verbatim
    assert "Turn 0: what about item 0?" in model.summary_requests[0].messages[0].text
    assert model.turn_requests[0].messages[-1].text == "And the final item?"
    assert "Turn 199" in " ".join(m.text for m in model.turn_requests[0].messages)
    # the state kept only what was sent: small enough to store, consistent to resume
    assert len(outcome.state.messages) < 60 and outcome.state.summary.startswith("Summary #")
    assert pairs_intact(outcome.state.messages)
    # the summary calls cost tokens, and count against the budget
    assert outcome.state.usage.total > sum(
        r.usage.total for r in [reply("42")] * len(model.turn_requests)
    )


async def test_short_threads_are_not_summarised(ctx: RunContext) -> None:
    model = ScriptedModel([reply("hi")])
    outcome = await Agent(model, builtin_registry()).run("hello", ctx, history=long_thread(ctx, 5))
    assert isinstance(outcome, Finished)
    assert model.summary_requests == [] and outcome.state.summary == ""


async def test_cut_before_an_assistant_turn_gets_a_continuation_note(ctx: RunContext) -> None:
    # One long run of tool calls: no plain user turn to cut at after the objective.
    model = ScriptedModel(
        [turn(call("calculator", expression="1+" * 100 + "1")) for _ in range(30)] + [reply("x")]
    )
    agent = Agent(model, builtin_registry(), config=AgentConfig(context_tokens=2500, max_steps=40))
    outcome = await agent.run("Add a lot of ones", ctx)
    assert isinstance(outcome, Finished)
    assert model.summary_requests
    for request in model.turn_requests:
        assert estimate_request(request) <= 2500
        assert pairs_intact(request.messages)
    assert any(r.messages[0].text == CONTINUATION for r in model.turn_requests)
