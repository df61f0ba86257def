"""Agent loop overhead per step: Parley vs LangGraph's prebuilt ReAct agent, same script.

Both agents run the same conversation against a zero-latency scripted chat model: nine
calls of one trivial `echo` tool, then a final answer (ten model calls). What is left is each
framework's own work per step: building the request, dispatching and validating the tool
call, wrapping the observation, bookkeeping. Runs alternate between the two so that machine
noise hits both alike; medians over many runs after a warm-up.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import warnings
from typing import Any

from agent import Agent, AgentConfig, RunState, ToolRegistry, tool
from agent.messages import ChatRequest, ChatResponse, Message, TextBlock, ToolUseBlock, Usage
from agent.protocols import RunContext

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


def make_parley() -> Any:
    agent = Agent(ZeroLatencyModel(), ToolRegistry([echo]), config=AgentConfig(max_steps=50))
    context = RunContext(conversation_id="bench", platform="bench", user_id="u", chat_id="c")

    async def run_once() -> None:
        outcome = await agent.run(OBJECTIVE, context)
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


async def main() -> None:
    parley, langgraph = make_parley(), make_langgraph()
    for _ in range(WARMUP):
        await parley()
        await langgraph()
    ours: list[float] = []
    theirs: list[float] = []
    for _ in range(RUNS):
        ours.append(await _time(parley))
        theirs.append(await _time(langgraph))
    per_step_ours = statistics.median(ours) / STEPS * 1e6
    per_step_theirs = statistics.median(theirs) / STEPS * 1e6
    ratio = per_step_ours / per_step_theirs
    print(f"script: {TOOL_CALLS} tool calls + final answer = {STEPS} steps; {RUNS} runs each")
    print(f"parley    median overhead per step: {per_step_ours:8.1f} µs")
    print(f"langgraph median overhead per step: {per_step_theirs:8.1f} µs")
    print(
        f"ratio parley/langgraph: {ratio:.3f} (target ≤ 0.333) -> {'OK' if ratio <= 1 / 3 else 'MISSED'}"
    )


if __name__ == "__main__":
    asyncio.run(main())
