"""MCP servers as a tool source: their tools offered as `<server>__<tool>`, with approval
derived from each tool's annotations (only `readOnlyHint: true` runs without asking).

The client side loads the `mcp` SDK (about 18 MB resident), so it is imported on first use:
a process without MCP servers reads the configuration module only.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agent.mcp.config import McpConfig, McpConfigError, ServerConfig, Timing, load_config

if TYPE_CHECKING:
    from agent.mcp.client import McpServer, McpToolbox
    from agent.mcp.polling import ServerTasks
    from agent.mcp.tools import McpTool, tool_name
    from agent.mcp.user import Credentials, UserServer

_LAZY = {
    "McpServer": "client",
    "McpToolbox": "client",
    "McpTool": "tools",
    "ServerTasks": "polling",
    "tool_name": "tools",
    "Credentials": "user",
    "UserServer": "user",
}

__all__ = [
    "Credentials",
    "McpConfig",
    "McpConfigError",
    "McpServer",
    "McpTool",
    "McpToolbox",
    "ServerConfig",
    "ServerTasks",
    "Timing",
    "UserServer",
    "load_config",
    "tool_name",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
