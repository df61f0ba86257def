"""MCP servers as a tool source: their tools offered as `<server>__<tool>`, with approval
derived from each tool's annotations (only `readOnlyHint: true` runs without asking)."""

from agent.mcp.client import McpServer, McpToolbox, Timing
from agent.mcp.config import McpConfig, McpConfigError, ServerConfig, load_config
from agent.mcp.tools import McpTool, tool_name

__all__ = [
    "McpConfig",
    "McpConfigError",
    "McpServer",
    "McpTool",
    "McpToolbox",
    "ServerConfig",
    "Timing",
    "load_config",
    "tool_name",
]
