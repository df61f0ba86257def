"""Stopping a run from outside: at the next step boundary, a model call in flight abandoned,
an approved action already running finished and reported, nothing started after the stop."""

from __future__ import annotations

import asyncio

from agent import Agent, AgentConfig, AwaitingApproval, Failed, builtin_registry
from agent.messages import ChatRequest, ChatResponse
from agent.protocols import RunContext
from agent.stopping import NOT_RUN
from agent.testing import ScriptedModel, call, reply, turn
from agent.tools import ToolRegistry, tool

CONTEXT = RunContext(conversation_id="c1", platform="console", user_id="ana", chat_id="c1")
ran: list[str] = []


@tool(side_effects=True, describe=lambda a: f"Send {a['what']}")
async def send(what: str) -> str:
    """Send something (slowly)."""
    ran.append(f"start {what}")
    await asyncio.sleep(0.2)
    ran.append(f"end {what}")
    return f"sent {what}"


@tool
async def look(what: str) -> str:
    """Look something up (slowly)."""
    ran.append(f"look {what}")
    await asyncio.sleep(0.2)
    return f"found {what}"


def registry() -> ToolRegistry:
    tools = builtin_registry()
    tools.register(send)
    tools.register(look)
    return tools


async def test_a_stop_during_a_model_call_abandons_it_and_nothing_runs_after() -> None:
    ran.clear()
    started = asyncio.Event()
    abandoned: list[bool] = []

    async def slow(request: ChatRequest) -> ChatResponse:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            abandoned.append(True)
            raise
        return turn(call("send", what="mail"))

    class Slow(ScriptedModel):
        async def complete(self, request: ChatRequest) -> ChatResponse:
            self.requests.append(request)
            return await slow(request)

    stop = asyncio.Event()
    agent = Agent(Slow(), registry(), config=AgentConfig(stream=False))
    running = asyncio.create_task(agent.run("send the mail", CONTEXT, stop=stop))
    await started.wait()
    stop.set()
    outcome = await asyncio.wait_for(running, 2)
    assert isinstance(outcome, Failed) and outcome.reason == "stopped"
    assert abandoned == [True] and ran == []
    assert not outcome.state.is_suspended


async def test_a_stop_while_read_only_tools_run_lets_them_finish_then_asks_no_model() -> None:
    ran.clear()
    model = ScriptedModel([turn(call("look", what="weather")), reply("never said")])
    stop = asyncio.Event()
    agent = Agent(model, registry(), config=AgentConfig(stream=False))
    running = asyncio.create_task(agent.run("weather?", CONTEXT, stop=stop))
    for _ in range(500):
        if ran == ["look weather"]:
            break
        await asyncio.sleep(0.01)
    stop.set()
    outcome = await running
    assert isinstance(outcome, Failed) and outcome.reason == "stopped"
    assert len(model.requests) == 1  # no model call after the stop
    assert [c.tool for c in outcome.trace.steps[0].tool_calls] == ["look"]
    last = outcome.state.messages[-1]
    assert last.role == "user" and "found weather" in str(last.content)


async def test_a_stop_while_an_approved_action_runs_lets_it_finish_and_skips_the_rest() -> None:
    ran.clear()
    model = ScriptedModel([turn(call("send", what="one"), call("send", what="two"))])
    agent = Agent(model, registry(), config=AgentConfig(stream=False))
    waiting = await agent.run("send both", CONTEXT)
    assert isinstance(waiting, AwaitingApproval)
    stop = asyncio.Event()
    resumed = asyncio.create_task(agent.resume(waiting.state, approved=True, stop=stop))
    for _ in range(500):
        if ran == ["start one"]:
            break
        await asyncio.sleep(0.01)
    stop.set()
    outcome = await resumed
    assert ran == ["start one", "end one"]  # finished, and "two" never started
    assert isinstance(outcome, Failed) and outcome.reason == "stopped"
    calls = {c.args["what"]: c for c in outcome.trace.resumed_calls}
    assert calls["one"].status == "ok" and "sent one" in calls["one"].observation
    assert calls["two"].status == "skipped" and calls["two"].observation == NOT_RUN
    assert len(model.requests) == 1  # no model call after the stop


async def test_a_stop_that_comes_with_a_plan_does_not_ask_for_approval() -> None:
    ran.clear()
    gate = asyncio.Event()

    def plan(request: ChatRequest) -> ChatResponse:
        gate.set()
        return turn(call("look", what="x"), call("send", what="y"))

    stop = asyncio.Event()
    agent = Agent(ScriptedModel([plan]), registry(), config=AgentConfig(stream=False))
    running = asyncio.create_task(agent.run("do it", CONTEXT, stop=stop))
    await gate.wait()
    stop.set()  # while the read-only call runs, before the plan would be put to the user
    outcome = await running
    assert isinstance(outcome, Failed) and outcome.reason == "stopped"
    assert ran == ["look x"] and not outcome.state.is_suspended
    results = str(outcome.state.messages[-1].content)
    assert "found x" in results and "stopped" in results


async def test_a_run_without_a_stop_signal_is_unchanged() -> None:
    model = ScriptedModel([reply("hello")])
    outcome = await Agent(model, registry()).run("hi", CONTEXT, stop=asyncio.Event())
    assert not isinstance(outcome, Failed)
