from __future__ import annotations

import asyncio
import time

import pytest

from agent.execution import ExecutionPolicy, execute
from agent.messages import ToolUseBlock
from agent.protocols import ProgressEvent, RunContext
from agent.tools import ToolContext, ToolError, ToolRegistry, TransientToolError, tool

FAST = ExecutionPolicy(timeout=1.0, retries=3, output_limit=400, backoff_base=0.02, backoff_max=1)


def use(name: str, **args: object) -> ToolUseBlock:
    return ToolUseBlock(id=f"call_{name}", name=name, input=args)


async def test_transient_failures_are_retried_with_growing_backoff(ctx: RunContext) -> None:
    attempts: list[float] = []

    @tool
    async def flaky() -> str:
        """Fails twice, then works."""
        attempts.append(time.monotonic())
        if len(attempts) < 3:
            raise TransientToolError("upstream busy")
        return "finally"

    result, trace = await execute(ToolRegistry([flaky]), use("flaky"), ToolContext(run=ctx), FAST)
    assert not result.is_error and "finally" in result.content
    assert trace.attempts == 3 and trace.status == "ok"
    first_wait, second_wait = attempts[1] - attempts[0], attempts[2] - attempts[1]
    # wait_exponential_jitter: base * 2**n plus up to `base` of jitter
    assert first_wait >= 0.02
    assert second_wait >= 0.04


async def test_timeouts_and_connection_errors_retry_then_become_observations(
    ctx: RunContext,
) -> None:
    calls = 0

    @tool(timeout=0.05, retries=2)
    async def slow() -> str:
        """Never answers in time."""
        nonlocal calls
        calls += 1
        await asyncio.sleep(10)
        return "never"

    @tool(retries=1)
    async def offline() -> str:
        """Cannot connect."""
        raise ConnectionRefusedError("refused 10.0.0.1:443 password=hunter2")

    registry = ToolRegistry([slow, offline])
    result, trace = await execute(registry, use("slow"), ToolContext(run=ctx), FAST)
    assert result.is_error and "timed out after 3 attempts" in result.content
    assert calls == 3 and trace.status == "error"
    result, trace = await execute(registry, use("offline"), ToolContext(run=ctx), FAST)
    assert result.is_error and "could not connect after 2 attempts" in result.content
    assert "hunter2" not in result.content


async def test_permanent_errors_are_not_retried(ctx: RunContext) -> None:
    calls = 0

    @tool
    async def strict(n: int) -> str:
        """Refuses odd numbers."""
        nonlocal calls
        calls += 1
        if n % 2:
            raise ToolError(f"{n} is odd")
        raise RuntimeError("bug with secret sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0")

    registry = ToolRegistry([strict])
    result, _ = await execute(registry, use("strict", n=3), ToolContext(run=ctx), FAST)
    assert result.is_error and result.content == "strict failed: 3 is odd"
    assert calls == 1
    result, _ = await execute(registry, use("strict", n=2), ToolContext(run=ctx), FAST)
    assert result.is_error and "failed unexpectedly (RuntimeError)" in result.content
    assert "sk-ant" not in result.content
    assert calls == 2


async def test_invalid_arguments_and_unknown_tools_are_observations(ctx: RunContext) -> None:
    @tool
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    registry = ToolRegistry([add])
    result, trace = await execute(registry, use("add", a="x"), ToolContext(run=ctx), FAST)
    assert result.is_error and trace.status == "invalid"
    assert "Invalid arguments for add" in result.content
    assert "a: Input should be a valid integer" in result.content
    assert "b: Field required" in result.content
    result, _ = await execute(registry, use("mul", a=1), ToolContext(run=ctx), FAST)
    assert result.is_error and "no tool named 'mul'" in result.content and "add" in result.content


async def test_output_is_truncated_redacted_and_marked(ctx: RunContext) -> None:
    events: list[ProgressEvent] = []

    async def on_progress(event: ProgressEvent) -> None:
        events.append(event)

    @tool
    async def dump() -> dict[str, str]:
        """Big output."""
        return {"token": "xoxb-1234567890-0987654321-AbCdEfGhIjKl", "blob": "z" * 5000}

    result, trace = await execute(
        ToolRegistry([dump]),
        use("dump"),
        ToolContext(run=ctx),
        FAST,
        step=4,
        on_progress=on_progress,
    )
    assert "xoxb-" not in result.content
    assert result.content.startswith('<tool_output tool="dump" trust="untrusted">')
    assert len(result.content) < 400 + 200
    assert "more characters cut" in result.content
    assert [(e.kind, e.step, e.tool) for e in events] == [
        ("tool_started", 4, "dump"),
        ("tool_finished", 4, "dump"),
    ]
    assert events[1].detail["status"] == "ok" and trace.duration > 0


async def test_cancellation_propagates_and_is_not_retried(ctx: RunContext) -> None:
    started = asyncio.Event()
    cancelled = 0

    @tool
    async def wait() -> str:
        """Waits."""
        nonlocal cancelled
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled += 1
            raise
        return "no"

    task = asyncio.create_task(
        execute(ToolRegistry([wait]), use("wait"), ToolContext(run=ctx), FAST)
    )
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled == 1
