"""The server side of MCP tasks (2025-11-25, experimental), for `tests.fakes.mcp_server`.

The `mcp` SDK has the task types but no task support, so this adds it: a middleware answers a
task-augmented `tools/call` with a `CreateTaskResult` and runs the tool in the background (the
SDK would check the answer against `CallToolResult`), advertises `capabilities.tasks` in the
`initialize` result, and an extension serves `tasks/get`, `tasks/result` and `tasks/cancel`.
Each task and each cancel is written to the ledger (`task <tool>`, `cancelled <tool>`).
`MCP_TASK_TTL_MS` sets the ttl it grants; a task past it is forgotten ("no such task"). With
`MCP_TASK_DIR`, tasks are kept in that folder and survive a restart of the server: one that
was working is run again by the new process, as a durable server would resume it.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import mcp_types as T
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver.server import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

POLL_MS = 100
TTL_MS = int(os.environ.get("MCP_TASK_TTL_MS", "600000"))
TASK_TOOLS = ("long_job", "confirm_job")  # listed with execution.taskSupport "optional"
# 2026-07-28: the task of `confirm_job` first asks whether to go on (`input_required`, one
# `inputRequests` entry "go") and takes the answer from `tasks/update`
ASK = {
    "method": "elicitation/create",
    "params": {
        "message": "Run the job on {item}?",
        "requestedSchema": {
            "type": "object",
            "properties": {"sure": {"type": "boolean", "description": "Run it?"}},
            "required": ["sure"],
        },
    },
}


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat()


@dataclass
class _Task:
    tool: str
    args: dict[str, Any] = field(default_factory=dict)
    status: T.TaskStatus = "working"
    message: str | None = None
    created: str = field(default_factory=_now)
    made: float = field(default_factory=time.monotonic)
    result: Any = None
    runner: asyncio.Task[None] | None = None
    asking: dict[str, Any] | None = None  # its inputRequests while input_required
    answer: asyncio.Future[dict[str, Any]] | None = None

    def wire(self, task_id: str) -> dict[str, Any]:
        shown = {
            "taskId": task_id,
            "status": self.status,
            "createdAt": self.created,
            "lastUpdatedAt": _now(),
            "ttl": TTL_MS,
            "pollInterval": POLL_MS,
        }
        shown |= {"inputRequests": self.asking} if self.asking else {}
        return shown | ({"statusMessage": self.message} if self.message else {})


class TaskServer:
    """The tasks of one server process; `call` runs a tool as the SDK would."""

    def __init__(self, call: Callable[[str, dict[str, Any]], Any], ledger: Callable[[str], None]):
        self._call = call
        self._ledger = ledger
        self.tasks: dict[str, _Task] = {}

    async def middleware(self, ctx: Any, call_next: Any) -> Any:
        if ctx.method == "initialize":
            result = await call_next(ctx)
            if isinstance(result, dict):
                result["capabilities"]["tasks"] = {
                    "cancel": {},
                    "requests": {"tools": {"call": {}}},
                }
            return result
        params = ctx.params if isinstance(ctx.params, dict) else {}
        if ctx.method == "tools/call" and "task" in params and params["name"] in TASK_TOOLS:
            task_id = uuid.uuid4().hex
            task = self.tasks[task_id] = _Task(params["name"], dict(params.get("arguments") or {}))
            self._ledger(f"task {task.tool}")
            self._start(task_id, task)
            return {"task": task.wire(task_id)}
        return await call_next(ctx)

    def _start(self, task_id: str, task: _Task) -> None:
        self._keep(task_id, task)
        task.runner = asyncio.create_task(self._run(task_id, task))

    async def _run(self, task_id: str, task: _Task) -> None:
        task.message = "started"
        if task.tool == "confirm_job" and "sure" not in task.args:
            task.args["sure"] = await self._ask(task)
        try:
            result = await self._call(task.tool, task.args)
        except Exception as exc:  # the SDK raises what the tool raised
            task.status, task.message = "failed", str(exc)[:200]
        else:
            task.result = result.model_dump(by_alias=True, mode="json", exclude_none=True)
            if result.is_error:
                task.status, task.message = "failed", result.content[0].text[:200]
            else:
                task.status, task.message = "completed", "done"
        self._keep(task_id, task)

    async def _ask(self, task: _Task) -> bool:
        """input_required until `tasks/update` answers "go"; whether the answer was yes."""
        ask = json.loads(json.dumps(ASK).replace("{item}", str(task.args.get("item"))))
        task.answer = asyncio.get_running_loop().create_future()
        task.status, task.message, task.asking = (
            "input_required",
            "waiting for an answer",
            {"go": ask},
        )
        response = await task.answer
        task.status, task.message, task.asking = "working", "going on", None
        content = response.get("content") or {}
        return response.get("action") == "accept" and content.get("sure") is True

    def _keep(self, task_id: str, task: _Task) -> None:
        if folder := os.environ.get("MCP_TASK_DIR"):
            kept = {k: getattr(task, k) for k in ("tool", "args", "status", "message", "result")}
            with open(os.path.join(folder, task_id), "w", encoding="utf-8") as file:
                json.dump(kept, file)

    def _task(self, task_id: str) -> _Task:
        folder = os.environ.get("MCP_TASK_DIR")
        path = os.path.join(folder, os.path.basename(task_id)) if folder else None
        if task_id not in self.tasks and path and os.path.exists(path):
            with open(path, encoding="utf-8") as file:  # kept by an earlier process
                task = self.tasks[task_id] = _Task(**json.load(file))
            if task.status == "working":
                self._start(task_id, task)
        task = self.tasks.get(task_id)
        if task is None or (time.monotonic() - task.made) * 1000 > TTL_MS:
            raise MCPError(code=T.INVALID_PARAMS, message="no such task")
        return task

    async def get(self, ctx: Any, params: T.GetTaskRequestParams) -> dict[str, Any]:
        return self._task(params.task_id).wire(params.task_id)

    async def result(self, ctx: Any, params: T.GetTaskPayloadRequestParams) -> Any:
        task = self._task(params.task_id)
        if task.status != "completed":
            raise MCPError(code=T.INVALID_PARAMS, message=f"task is {task.status}")
        return task.result

    async def cancel(self, ctx: Any, params: T.CancelTaskRequestParams) -> dict[str, Any]:
        task = self._task(params.task_id)
        if task.runner is not None and not task.runner.done():
            task.runner.cancel()
        task.status, task.message = "cancelled", None
        self._ledger(f"cancelled {task.tool}")
        return task.wire(params.task_id)


class _Update(T.RequestParams):
    task_id: str = Field(alias="taskId")
    input_responses: dict[str, Any] = Field(default_factory=dict, alias="inputResponses")


class TasksExtension(Extension):
    """Tasks in both revisions. 2025-11-25: `tasks/get`, `tasks/result`, `tasks/cancel` as
    above. 2026-07-28, the tasks extension (SEP-2663): a `tools/call` of a task tool from a
    client that declared the extension is answered with a flat `resultType: "task"`, one that
    did not gets -32021; `tasks/get` carries the result inline, `tasks/update` and
    `tasks/cancel` are acknowledged with an empty result; there is no `tasks/result`."""

    identifier = "io.modelcontextprotocol/tasks"

    def __init__(self, tasks: TaskServer) -> None:
        self._tasks = tasks

    async def intercept_tool_call(self, params: Any, ctx: Any, call_next: Any) -> Any:
        if not _modern_wire(ctx) or params.name not in TASK_TOOLS:
            return await call_next(ctx)
        require_client_extension(ctx, self.identifier)
        task_id = uuid.uuid4().hex
        task = self._tasks.tasks[task_id] = _Task(params.name, dict(params.arguments or {}))
        self._tasks._ledger(f"task {task.tool}")
        self._tasks._start(task_id, task)
        return {"resultType": "task", **_modern(task.wire(task_id))}

    async def get(self, ctx: Any, params: T.GetTaskRequestParams) -> dict[str, Any]:
        if not _modern_wire(ctx):
            return await self._tasks.get(ctx, params)
        task = self._tasks._task(params.task_id)
        shown = _modern(task.wire(params.task_id))
        if task.status == "completed" or (task.status == "failed" and task.result):
            shown |= {"status": "completed", "result": task.result}  # a tool's own error
        elif task.status == "failed":
            shown["error"] = {"code": T.INTERNAL_ERROR, "message": task.message or "failed"}
        return {"resultType": "complete", **shown}

    async def result(self, ctx: Any, params: T.GetTaskPayloadRequestParams) -> Any:
        if _modern_wire(ctx):  # gone from the extension
            raise MCPError(code=T.METHOD_NOT_FOUND, message="Method not found")
        return await self._tasks.result(ctx, params)

    async def update(self, ctx: Any, params: _Update) -> dict[str, Any]:
        if not _modern_wire(ctx):
            raise MCPError(code=T.METHOD_NOT_FOUND, message="Method not found")
        task = self._tasks._task(params.task_id)
        self._tasks._ledger(
            f"update {task.tool}: {json.dumps(params.input_responses, sort_keys=True)}"
        )
        if task.answer is not None and not task.answer.done() and "go" in params.input_responses:
            task.answer.set_result(params.input_responses["go"])
        return {"resultType": "complete"}

    async def cancel(self, ctx: Any, params: T.CancelTaskRequestParams) -> dict[str, Any]:
        answer = await self._tasks.cancel(ctx, params)
        return {"resultType": "complete"} if _modern_wire(ctx) else answer

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding("tasks/get", T.GetTaskRequestParams, self.get),
            MethodBinding("tasks/result", T.GetTaskPayloadRequestParams, self.result),
            MethodBinding("tasks/update", _Update, self.update),
            MethodBinding("tasks/cancel", T.CancelTaskRequestParams, self.cancel),
        )


def _modern_wire(ctx: Any) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _modern(wire: dict[str, Any]) -> dict[str, Any]:
    """A 2025-11-25 task as the extension names its fields (`ttlMs`, `pollIntervalMs`)."""
    shown = {k: v for k, v in wire.items() if k not in ("ttl", "pollInterval")}
    return shown | {"ttlMs": wire["ttl"], "pollIntervalMs": wire["pollInterval"]}
