"""Agent loop overhead per step: Parley vs LangGraph's prebuilt ReAct agent, same script.

Both agents run the same conversation against a zero-latency scripted chat model: nine
calls of one trivial `echo` tool, then a final answer (ten model calls). What is left is each
framework's own work per step: building the request, dispatching and validating the tool
call, wrapping the observation, bookkeeping. Runs alternate between the two so that machine
noise hits both alike; medians over many runs after a warm-up.

Parley runs as in production, with recall on: a real memory store (RedisVL on a throwaway
Redis Stack, the local embedding model) holding the user's 20 memories, asked before every
think step, each run with a new objective. LangGraph has no memory, so the like-for-like
comparison is also run without recall; the ratio goal applies to that one.
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
import time
import warnings
from typing import Any

import redis.asyncio as aioredis

from agent import Agent, AgentConfig, RunState, ToolRegistry, tool
from agent.messages import ChatRequest, ChatResponse, Message, TextBlock, ToolUseBlock, Usage
from agent.protocols import Recall, RunContext
from bench.support import bench_line, throwaway_redis
from memory import local_embedder, open_store

TOOL_CALLS = 9
STEPS = TOOL_CALLS + 1  # model calls per run
WARMUP = 30
RUNS = 300
OBJECTIVE = "Echo the word 'ping' nine times, one call at a time."


class ZeroLatencyModel:
    """Parley's ChatModel side: answers from the script by how far the conversation is."""

    name = "zero"

    async def complete(self, request: ChatRequest) -> ChatResponse:
        done = sum(1 for m in request.messages if m.role == "assistant")
        usage = Usage(input_tokens=10, output_tokens=5)
        if done < TOOL_CALLS:
            use = ToolUseBlock(id=f"call_{done}", name="echo", input={"text": "ping"})
            message = Message(role="assistant", content=[use])
            return ChatResponse(message=message, stop_reason="tool_use", usage=usage)
        text = [TextBlock(text="ping " * TOOL_CALLS)]
        return ChatResponse(
            message=Message(role="assistant", content=text), stop_reason="end_turn", usage=usage
        )


@tool
async def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


CONTEXT = RunContext(conversation_id="bench", platform="bench", user_id="u", chat_id="c")
MEMORIES = [
    f"{topic} note {n}: the user {fact}"
    for n, (topic, fact) in enumerate(
        itertools.product(
            ["work", "home", "travel", "food"],
            ["likes short answers", "ships on Fridays", "uses vim", "has a dog", "runs at 7"],
        )
    )
]


async def memory_store(redis: aioredis.Redis) -> Recall:
    store = await open_store(redis, local_embedder())
    for text in MEMORIES:  # the user's 20 memories, remembered as the tool does
        await store.remember(text, CONTEXT)
    return store


def make_parley(recall: Recall | None) -> Any:
    agent = Agent(
        ZeroLatencyModel(), ToolRegistry([echo]), config=AgentConfig(max_steps=50), recall=recall
    )
    runs = itertools.count()

    async def run_once() -> None:
        # a new objective each run: its recall query is embedded once, as in production
        outcome = await agent.run(f"{OBJECTIVE} (#{next(runs)})", CONTEXT)
        assert isinstance(outcome.state, RunState) and outcome.state.steps == STEPS, outcome

    return run_once


def make_langgraph() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langchain_core.language_models.chat_models import BaseChatModel
        from langchain_core.messages import AIMessage, BaseMessage
        from langchain_core.outputs import ChatGeneration, ChatResult
        from langchain_core.tools import tool as lc_tool
        from langgraph.prebuilt import create_react_agent

    class ZeroLatencyChat(BaseChatModel):
        """LangChain's side of the same script; async, so no thread hop is added."""

        @property
        def _llm_type(self) -> str:
            return "zero-latency"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _reply(self, messages: list[BaseMessage]) -> ChatResult:
            done = sum(1 for m in messages if isinstance(m, AIMessage))
            usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
            if done < TOOL_CALLS:
                message = AIMessage(
                    content="",
                    tool_calls=[{"name": "echo", "args": {"text": "ping"}, "id": f"call_{done}"}],
                    usage_metadata=usage,  # type: ignore[arg-type]
                )
            else:
                message = AIMessage(content="ping " * TOOL_CALLS, usage_metadata=usage)  # type: ignore[arg-type]
            return ChatResult(generations=[ChatGeneration(message=message)])

        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
            return self._reply(messages)

        async def _agenerate(
            self, messages: list[BaseMessage], *args: Any, **kwargs: Any
        ) -> ChatResult:
            return self._reply(messages)

    @lc_tool
    async def lc_echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    lc_echo.name = "echo"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = create_react_agent(ZeroLatencyChat(), [lc_echo])

    async def run_once() -> None:
        result = await graph.ainvoke({"messages": [("user", OBJECTIVE)]}, {"recursion_limit": 100})
        ai = [m for m in result["messages"] if isinstance(m, AIMessage)]
        assert len(ai) == STEPS, len(ai)

    return run_once


async def _time(run_once: Any) -> float:
    started = time.perf_counter()
    await run_once()
    return time.perf_counter() - started


async def compare(parley: Any, langgraph: Any) -> tuple[float, float]:
    """Median µs per step of each, alternating runs after a warm-up."""
    for _ in range(WARMUP):
        await parley()
        await langgraph()
    ours: list[float] = []
    theirs: list[float] = []
    for _ in range(RUNS):
        ours.append(await _time(parley))
        theirs.append(await _time(langgraph))
    return statistics.median(ours) / STEPS * 1e6, statistics.median(theirs) / STEPS * 1e6


async def main() -> None:
    langgraph = make_langgraph()
    with throwaway_redis() as url:
        redis = aioredis.Redis.from_url(url)
        recall = await memory_store(redis)
        with_recall, theirs_1 = await compare(make_parley(recall), langgraph)
        await redis.aclose()
    without_recall, theirs_2 = await compare(make_parley(None), langgraph)
    ratio = without_recall / theirs_2
    print(f"script: {TOOL_CALLS} tool calls + final answer = {STEPS} steps; {RUNS} runs each")
    print(f"parley, recall on (20 memories) per step: {with_recall:8.1f} µs")
    print(f"langgraph (alternated with it):           {theirs_1:8.1f} µs")
    print(f"parley, recall off, per step:             {without_recall:8.1f} µs")
    print(f"langgraph (alternated with it):           {theirs_2:8.1f} µs")
    print(f"ratio parley/langgraph like for like: {ratio:.3f} (target <= 0.333)")
    bench_line(
        "loop",
        ok=ratio <= 1 / 3,
        recall_step_us=f"{with_recall:.0f}",
        step_us=f"{without_recall:.0f}",
        langgraph_step_us=f"{theirs_2:.0f}",
        ratio=f"{ratio:.3f}",
        goal_ratio="<=0.333",
        recall_ratio=f"{with_recall / theirs_1:.2f}",
    )


if __name__ == "__main__":
    asyncio.run(main())
