"""Running one tool call: validate, time out, retry transient failures, observe.

Whatever happens, the caller gets a `ToolResultBlock` for the model — cancellation and a
tool's `ApprovalRequired`, `QuestionRequired` and `InputRequired` excepted, which propagate.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)

from agent.messages import ToolResultBlock, ToolUseBlock
from agent.observations import clean, render, untrusted
from agent.outcomes import ToolCallTrace
from agent.protocols import ProgressCallback, ProgressEvent
from agent.tools import (
    ApprovalRequired,
    InputRequired,
    QuestionRequired,
    Tool,
    ToolContext,
    ToolError,
    ToolRegistry,
    TransientToolError,
)

log = logging.getLogger(__name__)

RETRYABLE = (TransientToolError, TimeoutError, ConnectionError)


@dataclass(frozen=True, kw_only=True)
class ExecutionPolicy:
    timeout: float = 30.0
    retries: int = 3
    output_limit: int = 4000
    backoff_base: float = 0.5
    backoff_max: float = 8.0


def describe_validation_error(tool: str, error: ValidationError) -> str:
    """Field-by-field problems, without echoing the (possibly secret) input values."""
    problems = "; ".join(
        f"{'.'.join(str(part) for part in e['loc']) or '(arguments)'}: {e['msg']}"
        for e in error.errors()
    )
    return f"Invalid arguments for {tool}: {problems}. Fix them and call {tool} again."


def error_result(call_id: str, text: str, limit: int) -> ToolResultBlock:
    return ToolResultBlock(tool_use_id=call_id, content=clean(text, limit), is_error=True)


def check_call(registry: ToolRegistry, call: ToolUseBlock) -> Tool | str:
    """The tool a call names with valid arguments, or the problem to tell the model."""
    if not registry.has(call.name):
        names = ", ".join(t.name for t in registry.tools())
        return f"There is no tool named {call.name!r}. Available tools: {names}."
    tool = registry.get(call.name)
    try:
        tool.validate(call.input)
    except ValidationError as exc:
        return describe_validation_error(tool.name, exc)
    return tool


async def notify(callback: ProgressCallback | None, event: ProgressEvent) -> None:
    if callback is None:
        return
    try:
        await callback(event)
    except Exception:  # a broken progress display must not break the run
        log.warning("progress callback failed on %s", event.kind, exc_info=True)


async def execute(
    registry: ToolRegistry,
    call: ToolUseBlock,
    context: ToolContext,
    policy: ExecutionPolicy,
    *,
    step: int = 0,
    on_progress: ProgressCallback | None = None,
) -> tuple[ToolResultBlock, ToolCallTrace]:
    """Run one call to completion and turn the result or failure into an observation."""
    trace = ToolCallTrace(
        call_id=call.id, tool=call.name, args=dict(call.input), known=registry.has(call.name)
    )
    started = time.monotonic()
    checked = check_call(registry, call)
    if isinstance(checked, str):
        trace.status, trace.is_error = "invalid", True
        result = error_result(call.id, checked, policy.output_limit)
        trace.observation = result.content
        return result, trace
    tool = checked
    await notify(on_progress, ProgressEvent(kind="tool_started", step=step, tool=tool.name))
    try:
        if on_progress is not None:
            context = replace(context, progress=_reporter(on_progress, step, tool.name))
        value = await _call_with_retries(tool, call.input, context, policy, trace)
    except ApprovalRequired:
        if not context.approved:
            raise
        # asked and answered: a tool that asks again gets no second prompt
        result = error_result(call.id, f"{tool.name} could not run.", policy.output_limit)
    except QuestionRequired:
        if not context.approved:
            raise
        # an approved call cannot wait for the requester any more: say so instead
        text = f"{tool.name} could not run: the user has not connected their account."
        result = error_result(call.id, text, policy.output_limit)
    except InputRequired:
        raise  # the run waits for the answer, approved call or not, then calls again
    except ToolError as exc:
        result = error_result(call.id, f"{tool.name} failed: {exc}", policy.output_limit)
    except RETRYABLE as exc:
        kind = "timed out" if isinstance(exc, TimeoutError) else "could not connect"
        result = error_result(
            call.id,
            f"{tool.name} {kind} after {trace.attempts} attempts; try later or another way.",
            policy.output_limit,
        )
    except ValidationError as exc:  # raised by the tool's own code, not by our argument check
        result = error_result(call.id, f"{tool.name} failed: {exc}", policy.output_limit)
    except Exception as exc:
        log.exception("tool %s raised unexpectedly", tool.name)
        result = error_result(
            call.id, f"{tool.name} failed unexpectedly ({type(exc).__name__}).", policy.output_limit
        )
    else:
        result = ToolResultBlock(
            tool_use_id=call.id, content=untrusted(tool.name, render(value), policy.output_limit)
        )
    trace.duration = time.monotonic() - started
    trace.observation = result.content
    trace.is_error = result.is_error
    trace.status = "error" if result.is_error else "ok"
    await notify(
        on_progress,
        ProgressEvent(
            kind="tool_finished",
            step=step,
            tool=tool.name,
            detail={"status": trace.status, "duration": f"{trace.duration:.3f}"},
        ),
    )
    return result, trace


async def _call_with_retries(
    tool: Tool,
    args: dict[str, Any],
    context: ToolContext,
    policy: ExecutionPolicy,
    trace: ToolCallTrace,
) -> Any:
    timeout = tool.timeout if tool.timeout is not None else policy.timeout
    retries = tool.retries if tool.retries is not None else policy.retries
    retrying = AsyncRetrying(
        retry=retry_if_exception_type(RETRYABLE),
        stop=stop_after_attempt(retries + 1),
        wait=wait_exponential_jitter(
            multiplier=policy.backoff_base, max=policy.backoff_max, jitter=policy.backoff_base
        ),
        reraise=True,
    )
    async for attempt in retrying:
        with attempt:
            trace.attempts += 1
            try:
                async with asyncio.timeout(timeout):
                    return await tool(args, context)
            except RETRYABLE as exc:
                log.info(
                    "tool %s attempt %d failed (%s), may retry",
                    tool.name,
                    trace.attempts,
                    type(exc).__name__,
                )
                raise
    raise AssertionError("unreachable: tenacity re-raises the last failure")


def _reporter(
    on_progress: ProgressCallback, step: int, tool: str
) -> Callable[[str], Awaitable[None]]:
    async def report(status: str) -> None:
        event = ProgressEvent(kind="tool_progress", step=step, tool=tool, detail={"status": status})
        await notify(on_progress, event)

    return report
