from __future__ import annotations

import asyncio
import time

import pytest

from agent import Agent, AgentConfig, Failed, Finished, RunState, builtin_registry
from agent.llm.base import AllProvidersFailed, ProviderRejected, ProviderUnavailable
from agent.messages import ChatRequest, ChatResponse, Usage
from agent.protocols import MemoryRecord, ProgressEvent, RunContext
from agent.testing import ScriptedModel, call, reply, turn
from agent.tools import ToolRegistry, TransientToolError, tool
from tests.agent.doubles import ListMemory

FAST = AgentConfig(backoff_base=0.01, backoff_max=0.1)


@tool
async def lookup_order(order_id: int) -> dict[str, object]:
    """Look an order up by its number."""
    return {"order_id": order_id, "customer": "c-7", "status": "shipped"}


@tool
async def lookup_customer(customer: str) -> dict[str, str]:
    """Look a customer up."""
    return {"customer": customer, "email": "ada@example.com"}


def registry(*extra: object) -> ToolRegistry:
    tools = builtin_registry()
    for item in (lookup_order, lookup_customer, *extra):
        tools.register(item)  # type: ignore[arg-type]
    return tools


async def test_multi_step_tool_chain(ctx: RunContext) -> None:
    model = ScriptedModel(
        [
            turn(call("lookup_order", "t1", order_id=17), text="Let me find the order."),
            turn(call("lookup_customer", "t2", customer="c-7")),
            turn(call("calculator", "t3", expression="2 * 21")),
            reply("Order 17 shipped to ada@example.com; 42."),
        ]
    )
    outcome = await Agent(model, registry(), config=FAST).run("Where is order 17?", ctx)
    assert isinstance(outcome, Finished)
    assert outcome.answer == "Order 17 shipped to ada@example.com; 42."
    assert len(model.requests) == 4
    # each THINK saw the previous observation, paired with its call
    second = model.requests[1].messages
    assert second[-1].tool_results[0].tool_use_id == "t1"
    assert '"customer": "c-7"' in second[-1].tool_results[0].content
    assert "42" in model.requests[3].messages[-1].tool_results[0].content
    trace = outcome.trace
    assert trace.iterations == 4 and outcome.state.steps == 4
    assert trace.steps[0].thought == "Let me find the order."
    assert trace.tool_counts == {"lookup_order": 1, "lookup_customer": 1, "calculator": 1}
    assert trace.usage == Usage(input_tokens=40, output_tokens=20) == outcome.state.usage
    assert [c.tool for s in trace.steps for c in s.tool_calls] == [
        "lookup_order",
        "lookup_customer",
        "calculator",
    ]
    assert model.requests[0].tools == registry().specs()


async def test_a_tool_registered_after_the_agent_is_offered_and_callable(
    ctx: RunContext,
) -> None:
    tools = registry()
    model = ScriptedModel([reply("Hello."), turn(call("shout", "s1", text="hi")), reply("HI")])
    agent = Agent(model, tools, config=FAST)
    assert isinstance(await agent.run("Say hello", ctx), Finished)
    assert "shout" not in [spec.name for spec in model.requests[0].tools]

    @tool
    async def shout(text: str) -> str:
        """Say it louder."""
        return text.upper()

    tools.register(shout)
    outcome = await agent.run("Shout hi", ctx)
    assert isinstance(outcome, Finished) and outcome.answer == "HI"
    assert "shout" in [spec.name for spec in model.requests[1].tools]
    assert "HI" in model.requests[2].messages[-1].tool_results[0].content


async def test_transient_tool_failure_then_success(ctx: RunContext) -> None:
    attempts: list[float] = []

    @tool
    async def fetch_rates() -> str:
        """Exchange rates."""
        attempts.append(time.monotonic())
        if len(attempts) < 3:
            raise TransientToolError("503 from upstream")
        return "EUR/USD 1.1"

    model = ScriptedModel([turn(call("fetch_rates")), reply("1.1")])
    config = AgentConfig(backoff_base=0.03, backoff_max=1)
    outcome = await Agent(model, registry(fetch_rates), config=config).run("rate?", ctx)
    assert isinstance(outcome, Finished)
    assert len(attempts) == 3
    assert attempts[1] - attempts[0] >= 0.03 and attempts[2] - attempts[1] >= 0.06  # backoff
    observation = model.requests[1].messages[-1].tool_results[0]
    assert not observation.is_error and "EUR/USD 1.1" in observation.content
    assert outcome.trace.steps[0].tool_calls[0].attempts == 3


async def test_invalid_arguments_are_corrected_by_the_model(ctx: RunContext) -> None:
    model = ScriptedModel(
        [
            turn(call("lookup_order", "bad", order_id="seventeen")),
            turn(call("lookup_order", "good", order_id=17)),
            reply("shipped"),
        ]
    )
    outcome = await Agent(model, registry(), config=FAST).run("order 17?", ctx)
    assert isinstance(outcome, Finished) and outcome.answer == "shipped"
    error = model.requests[1].messages[-1].tool_results[0]
    assert error.is_error and error.tool_use_id == "bad"
    assert "order_id: Input should be a valid integer" in error.content
    fixed = model.requests[2].messages[-1].tool_results[0]
    assert not fixed.is_error and "shipped" in fixed.content
    assert outcome.trace.steps[0].tool_calls[0].status == "invalid"


async def test_max_steps_stop(ctx: RunContext) -> None:
    model = ScriptedModel([turn(call("current_time")) for _ in range(10)])
    outcome = await Agent(model, registry(), config=AgentConfig(max_steps=3)).run("loop", ctx)
    assert isinstance(outcome, Failed) and outcome.reason == "max_steps"
    assert len(model.requests) == 3 and outcome.state.steps == 3
    assert "too many steps" in outcome.message
    assert outcome.state.open_calls() == []  # consistent: usable as history


async def test_deadline_stop_cancels_the_slow_part(ctx: RunContext) -> None:
    finished_sleeping = False

    @tool(timeout=30)
    async def slow_report() -> str:
        """Takes its time."""
        nonlocal finished_sleeping
        await asyncio.sleep(5)
        finished_sleeping = True
        return "report"

    model = ScriptedModel([turn(call("slow_report", "s1")), reply("never")])
    started = time.monotonic()
    outcome = await Agent(model, registry(slow_report), config=AgentConfig(deadline=0.2)).run(
        "report please", ctx
    )
    assert time.monotonic() - started < 2
    assert isinstance(outcome, Failed) and outcome.reason == "deadline"
    assert not finished_sleeping
    last = outcome.state.messages[-1].tool_results[0]
    assert last.tool_use_id == "s1" and last.is_error  # the open call was closed
    # the failed run's state serves as the next run's history
    model.push(reply("hello again"))
    again = await Agent(model, registry()).run("hi", ctx, history=outcome.state)
    assert isinstance(again, Finished)


async def test_token_budget_stop(ctx: RunContext) -> None:
    big = Usage(input_tokens=600, output_tokens=100)
    model = ScriptedModel([turn(call("current_time"), usage=big) for _ in range(5)])
    outcome = await Agent(model, registry(), config=AgentConfig(token_budget=1000)).run("x", ctx)
    assert isinstance(outcome, Failed) and outcome.reason == "token_budget"
    assert len(model.requests) == 2 and outcome.state.usage.total == 1400


@pytest.mark.parametrize(
    "error",
    [
        ProviderUnavailable("anthropic", "timeout"),
        ProviderRejected("anthropic", "400 bad request: messages.1 invalid"),
        AllProvidersFailed([ProviderUnavailable("anthropic", "529"), ConnectionError("ollama")]),
    ],
)
async def test_model_errors_fail_kindly(ctx: RunContext, error: Exception) -> None:
    model = ScriptedModel([turn(call("current_time")), error])
    outcome = await Agent(model, registry()).run("time?", ctx)
    assert isinstance(outcome, Failed) and outcome.reason == "model_error"
    assert outcome.message == (
        "I can't reach my language model right now; please try again in a few minutes."
    )
    assert str(error) not in outcome.message
    assert outcome.trace.errors == [f"model_error: {type(error).__name__}"]


async def test_unexpected_bug_fails_without_leaking(ctx: RunContext) -> None:
    def broken(request: ChatRequest) -> ChatResponse:
        raise KeyError("internal detail")

    outcome = await Agent(ScriptedModel([broken]), registry()).run("hi", ctx)
    assert isinstance(outcome, Failed) and outcome.reason == "error"
    assert "internal detail" not in outcome.message


async def test_recall_before_every_model_call(ctx: RunContext, memory: ListMemory) -> None:
    await memory.remember("Ada prefers metric units", ctx, kind="preference")
    other = RunContext(conversation_id="x", platform="telegram", user_id="99", chat_id="99")
    await memory.remember("Bob's secret plan", other)
    model = ScriptedModel(
        [turn(call("current_time")), turn(call("calculator", expression="1+1")), reply("2")]
    )
    outcome = await Agent(model, registry(), memory=memory).run("How far is it?", ctx)
    assert isinstance(outcome, Finished)
    assert len(memory.queries) == len(model.requests) == 3
    # the query follows the work: the objective, then the latest tool observation
    assert memory.queries[0] == "How far is it?"
    assert memory.queries[1].startswith("How far is it?\n") and "UTC" in memory.queries[1]
    assert memory.queries[2].startswith("How far is it?\n") and "2" in memory.queries[2]
    for request in model.requests:
        assert "<remembered>\n- [m1] (preference) Ada prefers metric units\n</remembered>" in (
            request.system
        )
        assert "Bob's secret plan" not in request.system


async def test_an_unchanged_recall_query_is_not_searched_again(
    ctx: RunContext, memory: ListMemory
) -> None:
    await memory.remember("Ada prefers metric units", ctx, kind="preference")
    model = ScriptedModel(
        [
            turn(call("calculator", expression="6*7")),
            turn(call("calculator", expression="42")),  # the same observation again
            reply("42"),
        ]
    )
    outcome = await Agent(model, registry(), memory=memory).run("What is six times seven?", ctx)
    assert isinstance(outcome, Finished)
    assert len(model.requests) == 3 and len(memory.queries) == 2
    assert all("Ada prefers metric units" in r.system for r in model.requests)


async def test_the_observation_in_the_recall_query_is_bounded(ctx: RunContext) -> None:
    from agent.messages import Message, ToolResultBlock
    from agent.recalling import OBSERVATION_CHARS, recall_query
    from agent.state import RunState

    state = RunState(context=ctx, objective="Summarise the log", last_user_text="Summarise the log")
    state.messages = [
        Message.user("Summarise the log"),
        Message(role="user", content=[ToolResultBlock(tool_use_id="t", content="x" * 50_000)]),
    ]
    query = recall_query(state)
    assert query.startswith("Summarise the log\n")
    assert len(query) == len("Summarise the log\n") + OBSERVATION_CHARS
    state.messages.append(Message.user("and the errors only"))
    assert recall_query(state) == "Summarise the log"  # a plain user turn: no observation


async def test_recall_failure_does_not_stop_the_run(ctx: RunContext) -> None:
    class DownRecall:
        async def recall(
            self, query: str, context: RunContext, k: int | None = None
        ) -> list[MemoryRecord]:
            raise ConnectionError("redis down")

    outcome = await Agent(ScriptedModel([reply("ok")]), registry(), recall=DownRecall()).run(
        "hi", ctx
    )
    assert isinstance(outcome, Finished)


async def test_history_carries_messages_and_summary_not_counters(ctx: RunContext) -> None:
    model = ScriptedModel([turn(call("current_time")), reply("It is noon.")])
    agent = Agent(model, registry())
    first = await agent.run("What time is it?", ctx)
    assert isinstance(first, Finished)
    first.state.summary = "They talked about time."
    model.push(reply("You asked about the time."))
    second = await agent.run("What did I ask?", ctx, history=first.state)
    assert isinstance(second, Finished)
    request = model.requests[-1]
    assert [m.role for m in request.messages] == ["user", "assistant", "user", "assistant", "user"]
    assert request.messages[-1].text == "What did I ask?"
    assert "They talked about time." in request.system
    assert second.state.steps == 1 and second.state.run_id != first.state.run_id
    assert second.state.usage == Usage(input_tokens=10, output_tokens=5)


async def test_progress_events(ctx: RunContext) -> None:
    events: list[ProgressEvent] = []

    async def on_progress(event: ProgressEvent) -> None:
        events.append(event)

    async def broken_display(event: ProgressEvent) -> None:
        raise RuntimeError("display broke")

    model = ScriptedModel([turn(call("current_time")), reply("now")])
    agent = Agent(model, registry(), on_progress=broken_display)
    outcome = await agent.run("time", ctx, on_progress=on_progress)  # the call's callback wins
    assert isinstance(outcome, Finished)
    assert [(e.kind, e.step, e.tool) for e in events] == [
        ("step_started", 1, None),
        ("tool_started", 1, "current_time"),
        ("tool_finished", 1, "current_time"),
        ("step_started", 2, None),
    ]
    model.push(reply("still fine"))
    assert isinstance(await agent.run("again", ctx), Finished)  # a failing callback is harmless


async def test_cancellation_cancels_and_drains_tool_tasks(ctx: RunContext) -> None:
    started = 0
    cleaned = 0
    both_started = asyncio.Event()

    @tool
    async def crawl(site: str) -> str:
        """Crawl a site."""
        nonlocal started, cleaned
        started += 1
        if started == 2:
            both_started.set()
        try:
            await asyncio.sleep(10)
        finally:
            cleaned += 1
        return site

    model = ScriptedModel([turn(call("crawl", site="a"), call("crawl", site="b"))])
    task = asyncio.create_task(Agent(model, registry(crawl)).run("crawl both", ctx))
    await asyncio.wait_for(both_started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned == 2  # both tool tasks were cancelled and finished before run() re-raised


async def test_empty_answer_gets_a_fallback(ctx: RunContext) -> None:
    outcome = await Agent(ScriptedModel([reply("  ")]), registry()).run("hm", ctx)
    assert isinstance(outcome, Finished) and outcome.answer
    assert outcome.state.messages[-1].text == outcome.answer
    assert RunState.model_validate_json(outcome.state.model_dump_json()) == outcome.state
