"""MCP tool call overhead: a stdio MCP server's tool vs the same tool as a Python function.

Both go through the agent's executor (argument check, timeout, observation), alternating so
machine noise hits both alike; what differs is the MCP round trip: JSON-RPC over the
server's stdin/stdout and the server's own dispatch. The server is the test server built
with the `mcp` SDK (tests/fakes/mcp_server.py), started once. Goal: the MCP call's p50 stays
at or under 5 ms, so a remote tool costs nothing a chat user could notice.
"""

from __future__ import annotations

import asyncio
import statistics
import time

from agent import ToolRegistry, tool
from agent.execution import ExecutionPolicy, execute
from agent.mcp import McpConfig, McpToolbox
from agent.messages import ToolUseBlock
from agent.outcomes import ToolCallTrace
from agent.protocols import RunContext
from agent.tools import ToolContext
from bench.support import describe, percentile
from tests.fakes.mcp_process import stdio_server

WARMUP = 50
CALLS = 1000
GOAL_P50 = 0.005  # seconds, MCP stdio call end to end


@tool
async def lookup(key: str, upper: bool = False) -> str:
    """Look a key up (the same answer as the MCP server's `lookup`)."""
    value = f"value of {key}"
    return value.upper() if upper else value


async def main() -> None:
    context = ToolContext(
        run=RunContext(conversation_id="bench", platform="bench", user_id="u", chat_id="c")
    )
    policy = ExecutionPolicy()
    box = McpToolbox(McpConfig(mcpServers={"test": stdio_server(tools=["lookup"])}))
    await box.start()
    try:
        assert box.servers["test"].state == "ready", box.servers["test"].error
        registry = ToolRegistry([lookup]).with_tools(box.tools_for(context.run))

        async def timed(name: str, index: int) -> float:
            use = ToolUseBlock(id=f"c{index}", name=name, input={"key": f"k{index}"})
            started = time.perf_counter()
            result, trace = await execute(registry, use, context, policy)
            elapsed = time.perf_counter() - started
            assert isinstance(trace, ToolCallTrace) and not result.is_error, result.content
            assert f"value of k{index}" in result.content
            return elapsed

        for index in range(WARMUP):
            await timed("lookup", index)
            await timed("test__lookup", index)
        direct: list[float] = []
        remote: list[float] = []
        for index in range(CALLS):
            direct.append(await timed("lookup", index))
            remote.append(await timed("test__lookup", index))
    finally:
        await box.stop()

    overhead = statistics.median(remote) - statistics.median(direct)
    p50, p95 = statistics.median(remote), percentile(remote, 0.95)
    ok = p50 <= GOAL_P50
    print(f"{CALLS} calls each, alternating, after {WARMUP} warm-up calls")
    print(f"direct Python tool:  {describe(direct)}")
    print(f"MCP stdio tool:      {describe(remote)}")
    print(f"MCP overhead at p50: {overhead * 1000:.2f} ms")
    print(
        f"BENCH mcp stdio_p50_ms={p50 * 1000:.2f} stdio_p95_ms={p95 * 1000:.2f} "
        f"overhead_p50_ms={overhead * 1000:.2f} goal_p50_ms={GOAL_P50 * 1000:.0f} ok={ok}"
    )


if __name__ == "__main__":
    asyncio.run(main())
