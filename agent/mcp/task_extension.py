"""Long tool calls on 2026-07-28 servers: the tasks extension (`io.modelcontextprotocol/tasks`,
SEP-2663). The `mcp` SDK has no client for it; this builds one on the session's primitives.

Parley declares the extension in each request's client capabilities (the session's
`extensions`, stamped into `_meta` on every 2026-07-28 request) and claims the
`resultType: "task"` answer of `tools/call` (`ResultClaim`), so a server that chooses to run a
call as a task answers with a flat task at once. Parley then polls `tasks/get` at the server's
`pollIntervalMs`; the finished task carries the tool's result inline (there is no
`tasks/result`); each status message shows as the run's status line. A run that stops sends
`tasks/cancel`. A task still working when its call's time is nearly up is handed off
(`following.Handoff`) as a 2025-11-25 task is, and the follower polls it through
`task_state` / `task_result` here.

A task that needs the person's input (`input_required`, its `inputRequests`) is not
cancelled: the call returns the questions as a `TaskQuestion` (Parley's own state, "task:<id>"),
the run asks the requester as for any server question, and their answers go to the task in
`tasks/update` (`answer`); the call then follows the task on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Literal

import mcp.types as mt
from mcp import ClientSession
from mcp.client.extension import ClaimContext, ResultClaim
from mcp.shared.dispatcher import ProgressFnT as Progress
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict, Field, ValidationError

from agent.mcp.following import HANDED_OFF, Handoff, TaskState, cancel_shielded, interval
from agent.mcp.revision import completed, is_modern
from agent.tools import ToolError

log = logging.getLogger(__name__)

EXTENSION = "io.modelcontextprotocol/tasks"
CANCEL_TIMEOUT = 5.0
TASK = "task:"  # the state of a task's question: "task:<task id>"


class TaskQuestion(mt.InputRequiredResult):
    """A task's questions, in the shape of a server's `input_required`: its state is
    Parley's ("task:<task id>"), which no server's result can pass for."""


class Task(mt.Result):
    """A task as the extension shows it in `tasks/get`."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    result_type: str | None = Field(None, alias="resultType")
    task_id: str = Field(alias="taskId")
    status: Literal["working", "input_required", "completed", "failed", "cancelled"]
    status_message: str | None = Field(None, alias="statusMessage")
    ttl_ms: int | None = Field(None, alias="ttlMs")
    poll_interval_ms: int | None = Field(None, alias="pollIntervalMs")
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @property
    def input_requests(self) -> Any:
        """`inputRequests` while `input_required` (kept as an extra field: the SDK refuses a
        claim model that names a field of its own result types)."""
        return (self.model_extra or {}).get("inputRequests")


class CreatedTask(Task):
    """The flat answer of a `tools/call` the server runs as a task."""

    result_type: Literal["task"] = Field("task", alias="resultType")  # type: ignore[assignment]


class _TaskId(mt.RequestParams):
    task_id: str = Field(alias="taskId")


class _TaskRequest(mt.Request[_TaskId, str]):
    method: str
    params: _TaskId


class _Update(_TaskId):
    input_responses: dict[str, Any] = Field(alias="inputResponses")


class _UpdateRequest(mt.Request[_Update, str]):
    method: str
    params: _Update


def session_options() -> dict[str, Any]:
    """What a `ClientSession` needs to take part: the extension, and its claim."""
    claim = ResultClaim(
        result_type="task",
        model=CreatedTask,
        resolve=_resolve,
        protocol_versions=frozenset(MODERN_PROTOCOL_VERSIONS),
    )
    return {"extensions": {EXTENSION: {}}, "result_claims": {EXTENSION: [claim]}}


def offers_extension(session: ClientSession) -> bool:
    """A 2026-07-28 server that advertises the tasks extension."""
    caps = session.server_capabilities
    return is_modern(session) and caps is not None and EXTENSION in (caps.extensions or {})


async def call(
    session: ClientSession,
    tool: str,
    args: dict[str, Any],
    progress: Progress | None,
    handoff: Handoff | None = None,
) -> mt.CallToolResult | mt.InputRequiredResult:
    """Call a tool the server may run as a task; its result (waiting for the task, or
    handing it off), or the server's `input_required`."""
    try:
        answer = await session.call_tool(
            tool, args, progress_callback=progress, allow_input_required=True, allow_claimed=True
        )
    except ValidationError as exc:  # no resultType: complete, as 2026-07-28 says
        if (done := await completed(session, tool, exc)) is None:
            raise
        return done
    if not isinstance(answer, Task):
        assert isinstance(answer, mt.CallToolResult | mt.InputRequiredResult)
        return answer
    return await _wait(session, tool, answer, progress, handoff)


async def answer(
    session: ClientSession,
    tool: str,
    task_id: str,
    responses: mt.InputResponses,
    progress: Progress | None,
    handoff: Handoff | None = None,
) -> mt.CallToolResult | mt.InputRequiredResult:
    """Give a task waiting on input the person's answers (`tasks/update`), then follow it
    on as `call` does."""
    params = {
        "taskId": task_id,
        "inputResponses": {
            key: response.model_dump(mode="json", by_alias=True, exclude_none=True)
            for key, response in responses.items()
        },
    }
    request = _UpdateRequest(method="tasks/update", params=_Update.model_validate(params))
    await session.send_request(request, mt.EmptyResult)
    return await _wait(session, tool, await get(session, task_id), progress, handoff)


async def _wait(
    session: ClientSession,
    tool: str,
    first: Task,
    progress: Progress | None,
    handoff: Handoff | None,
) -> mt.CallToolResult | mt.InputRequiredResult:
    """Follow a task to its end or its next question, or hand it off near the time limit."""
    latest = [first]
    try:
        if handoff is None:
            return await _follow(session, latest, progress)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(handoff.after):
                return await _follow(session, latest, progress)
    except asyncio.CancelledError:
        await _cancel(session, latest[0].task_id)
        raise
    assert handoff is not None
    task = latest[0]
    try:
        await handoff.follow(task.task_id, task.poll_interval_ms, task.ttl_ms)
    except BaseException as exc:  # not kept: the task stops with its call
        await _cancel(session, task.task_id)
        if isinstance(exc, Exception):
            log.warning("MCP task %s of %s could not be followed: %r", task.task_id, tool, exc)
            raise ToolError("it ran out of time, and could not be followed to its end") from None
        raise
    log.info("MCP task %s of %s handed to the follower", task.task_id, tool)
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=HANDED_OFF)])


async def _follow(
    session: ClientSession, latest: list[Task], progress: Progress | None
) -> mt.CallToolResult | mt.InputRequiredResult:
    shown: str | None = None
    while True:
        task = latest[0]
        line = task.status_message or task.status
        if progress is not None and line != shown:
            shown = line
            await progress(0, None, line)
        if task.status in ("completed", "failed", "cancelled"):
            return outcome(task)
        if task.status == "input_required" and task.input_requests:  # the person answers
            return question(task)
        await asyncio.sleep(interval(task.poll_interval_ms))
        latest[0] = await get(session, task.task_id)


def question(task: Task) -> TaskQuestion:
    """A task's pending input requests as Parley's own `input_required`; ToolError when the
    server's requests are not ones a client can read."""
    try:
        asked = mt.InputRequiredResult.model_validate(
            {"resultType": "input_required", "inputRequests": task.input_requests}
        )
    except ValidationError:
        raise ToolError("the task asked for input in a form Parley cannot read") from None
    return TaskQuestion(input_requests=asked.input_requests, request_state=TASK + task.task_id)


def outcome(task: Task) -> mt.CallToolResult:
    """A finished task's result (inline), or ToolError for a failed or cancelled one."""
    if task.status == "completed" and task.result is not None:
        return mt.CallToolResult.model_validate(task.result)
    if task.status == "cancelled":
        raise ToolError("the server cancelled the task")
    reason = (task.error or {}).get("message") or task.status_message or "no reason given"
    raise ToolError(f"the task failed: {str(reason)[:200]}")


async def get(session: ClientSession, task_id: str) -> Task:
    request = _TaskRequest(method="tasks/get", params=_TaskId.model_validate({"taskId": task_id}))
    return await session.send_request(request, Task)


async def task_state(session: ClientSession, task_id: str) -> TaskState:
    task = await get(session, task_id)
    return TaskState(
        status=task.status,
        message=task.status_message,
        poll_ms=task.poll_interval_ms,
        ttl_ms=task.ttl_ms,
    )


async def task_result(session: ClientSession, task_id: str) -> mt.CallToolResult:
    return outcome(await get(session, task_id))


async def cancel_task(session: ClientSession, task_id: str) -> None:
    request = _TaskRequest(
        method="tasks/cancel", params=_TaskId.model_validate({"taskId": task_id})
    )
    await session.send_request(request, mt.EmptyResult)


async def _cancel(session: ClientSession, task_id: str) -> None:
    """Tell the server to stop; shielded from the cancellation that asked for it."""
    await cancel_shielded(lambda: cancel_task(session, task_id), CANCEL_TIMEOUT)


async def _resolve(task: CreatedTask, context: ClaimContext) -> mt.CallToolResult:
    """The SDK's own way to finish a claimed task (its `Client`): poll it to the end."""
    done = await _follow(context.session, [task], None)
    if not isinstance(done, mt.CallToolResult):  # nobody here to answer it
        await _cancel(context.session, task.task_id)
        raise ToolError("the task asked a question, and nobody is here to answer it")
    return done
