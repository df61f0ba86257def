"""Long tool calls as MCP tasks (2025-11-25, experimental in the specification).

A server that advertises `capabilities.tasks.requests.tools.call` may run a tool whose
listing allows it (`execution.taskSupport` "optional" or "required") as a task: the
`tools/call` carries a `task` field and is answered at once with a `CreateTaskResult`; the
client polls `tasks/get` at the server's `pollInterval` and fetches `tasks/result` once the
task is `completed`. Each status message shows as the run's status line, as progress does.
A run that stops (cancelled) sends `tasks/cancel` so the server's work stops too.

A task still working when its call's time is nearly up is handed off (`following.Handoff`)
instead of cancelled, where the host follows tasks: the call returns at once saying the
result will be posted.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import mcp.types as mt
import mcp_types
from mcp import ClientSession
from mcp.shared.dispatcher import ProgressFnT as Progress

from agent.mcp.following import HANDED_OFF, Handoff, TaskState, cancel_shielded, interval
from agent.tools import ToolError

log = logging.getLogger(__name__)

CANCEL_TIMEOUT = 5.0
TASK_TTL_MS = 3_600_000  # asked of the server: keep the result for an hour


def allows_task(tool: mt.Tool) -> bool:
    """The tool's listing lets it run as a task."""
    return tool.execution is not None and tool.execution.task_support in ("optional", "required")


def offers_tasks(session: ClientSession) -> bool:
    """The server runs `tools/call` as tasks (its `capabilities.tasks`)."""
    caps = session.server_capabilities
    tasks = caps.tasks if caps is not None else None
    requests = tasks.requests if tasks is not None else None
    return requests is not None and requests.tools is not None and requests.tools.call is not None


async def call_as_task(
    session: ClientSession,
    tool: str,
    args: dict[str, Any],
    progress: Progress | None,
    handoff: Handoff | None = None,
) -> mt.CallToolResult:
    """Run `tool` as a task and wait for its result (or hand it off); MCPError as for any
    call."""
    params = {"name": tool, "arguments": args, "task": {"ttl": TASK_TTL_MS}}
    # The SDK checks a tools/call answer against CallToolResult; a task-augmented call is
    # answered with a CreateTaskResult (the SDK has the type, not the call), so it goes raw.
    raw = await session._dispatcher.send_raw_request("tools/call", params, {})
    latest = [mcp_types.CreateTaskResult.model_validate(raw, by_name=False).task]
    try:
        if handoff is None:
            return await _follow(session, latest, progress)
        try:
            async with asyncio.timeout(handoff.after):
                return await _follow(session, latest, progress)
        except TimeoutError:
            pass
    except asyncio.CancelledError:
        await _cancel(session, latest[0].task_id)
        raise
    assert handoff is not None  # without one, the call has returned or raised
    task = latest[0]
    try:
        await handoff.follow(task.task_id, task.poll_interval, task.ttl)
    except BaseException as exc:  # not kept (Redis away, say): the task stops with its call
        await _cancel(session, task.task_id)
        if isinstance(exc, Exception):
            log.warning("MCP task %s of %s could not be followed: %r", task.task_id, tool, exc)
            raise ToolError("it ran out of time, and could not be followed to its end") from None
        raise
    log.info("MCP task %s of %s handed to the follower", task.task_id, tool)
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=HANDED_OFF)])


async def _follow(
    session: ClientSession, latest: list[mcp_types.Task], progress: Progress | None
) -> mt.CallToolResult:
    """Poll to the end; `latest[0]` is the newest state seen (for a handoff)."""
    shown: str | None = None
    while True:
        task = latest[0]
        line = task.status_message or task.status
        if progress is not None and line != shown:
            shown = line
            await progress(0, None, line)
        if task.status == "completed":
            return await task_payload(session, task.task_id)
        if task.status == "failed":
            raise ToolError(f"the task failed: {task.status_message or 'no reason given'}")
        if task.status == "cancelled":
            raise ToolError("the server cancelled the task")
        await asyncio.sleep(interval(task.poll_interval))
        request = mcp_types.GetTaskRequest(
            params=mcp_types.GetTaskRequestParams(task_id=task.task_id)
        )
        latest[0] = await session.send_request(request, mcp_types.GetTaskResult)


async def task_state(session: ClientSession, task_id: str) -> TaskState:
    request = mcp_types.GetTaskRequest(params=mcp_types.GetTaskRequestParams(task_id=task_id))
    task = await session.send_request(request, mcp_types.GetTaskResult)
    return TaskState(
        status=task.status,
        message=task.status_message,
        poll_ms=task.poll_interval,
        ttl_ms=task.ttl,
    )


async def task_payload(session: ClientSession, task_id: str) -> mt.CallToolResult:
    payload = mcp_types.GetTaskPayloadRequest(
        params=mcp_types.GetTaskPayloadRequestParams(task_id=task_id)
    )
    return await session.send_request(payload, mt.CallToolResult)


async def cancel_task(session: ClientSession, task_id: str) -> None:
    request = mcp_types.CancelTaskRequest(params=mcp_types.CancelTaskRequestParams(task_id=task_id))
    await session.send_request(request, mcp_types.CancelTaskResult)


async def _cancel(session: ClientSession, task_id: str) -> None:
    """Tell the server to stop; shielded from the cancellation that asked for it."""
    await cancel_shielded(lambda: cancel_task(session, task_id), CANCEL_TIMEOUT)
    log.info("MCP task %s cancelled with its run", task_id)
