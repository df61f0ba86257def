"""The tasks of a toolbox's shared servers, for the host's follower (`following.TaskPolling`).

Each request goes through its server's live session (`McpServer.request`), so a server that is
down is woken and waited for, and its trouble reads as ConnectionError; a server that answers
with an error (it does not know the task) as ToolError. Per-user servers make ordinary calls
and hand nothing off, so only shared ones are asked.
"""

from __future__ import annotations

from collections.abc import Awaitable

import mcp.types as mt
from mcp import ClientSession

import agent.mcp.task_extension as extension
from agent.mcp.client import McpServer, McpToolbox
from agent.mcp.following import TaskState
from agent.mcp.revision import is_modern
from agent.mcp.tasks import cancel_task, task_payload, task_state
from agent.mcp.tools import result_text
from agent.tools import ToolError


class ServerTasks:
    def __init__(self, toolbox: McpToolbox) -> None:
        self.toolbox = toolbox

    def _server(self, name: str) -> McpServer:
        server = self.toolbox.servers.get(name)
        if server is None:  # no longer configured: its tasks cannot be asked about
            raise ToolError(f"MCP server {name} is not configured")
        return server

    async def task_state(self, server: str, task_id: str) -> TaskState:
        def ask(s: ClientSession) -> Awaitable[TaskState]:
            return (extension.task_state if is_modern(s) else task_state)(s, task_id)

        return await self._server(server).request(ask)

    async def task_result(self, server: str, task_id: str) -> tuple[str, bool]:
        def ask(s: ClientSession) -> Awaitable[mt.CallToolResult]:
            return (extension.task_result if is_modern(s) else task_payload)(s, task_id)

        result = await self._server(server).request(ask)
        return result_text(result), bool(result.is_error)

    async def cancel_task(self, server: str, task_id: str) -> None:
        def ask(s: ClientSession) -> Awaitable[None]:
            return (extension.cancel_task if is_modern(s) else cancel_task)(s, task_id)

        await self._server(server).request(ask)
