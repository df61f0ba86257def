"""The tasks of a toolbox's shared servers, for the host's follower (`following.TaskPolling`).

Each request goes through its server's live session (`McpServer.request`), so a server that is
down is woken and waited for, and its trouble reads as ConnectionError; a server that answers
with an error (it does not know the task) as ToolError. Per-user servers make ordinary calls
and hand nothing off, so only shared ones are asked.
"""

from __future__ import annotations

from agent.mcp.client import McpServer, McpToolbox
from agent.mcp.following import TaskState
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
        return await self._server(server).request(lambda s: task_state(s, task_id))

    async def task_result(self, server: str, task_id: str) -> tuple[str, bool]:
        result = await self._server(server).request(lambda s: task_payload(s, task_id))
        return result_text(result), bool(result.is_error)

    async def cancel_task(self, server: str, task_id: str) -> None:
        await self._server(server).request(lambda s: cancel_task(s, task_id))
