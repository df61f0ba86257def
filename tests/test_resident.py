"""What a service process loads only when it needs it: the MCP SDK (with the web server it
brings along, ~18 MB resident) only where MCP servers are configured, and pypdf only in the
child process that reads a PDF."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.process

LAZY = ("mcp", "starlette", "uvicorn", "pypdf")


def test_a_service_without_mcp_servers_does_not_load_the_mcp_sdk_or_pypdf() -> None:
    probe = (
        "import sys\n"
        "import bot.cli, bot.wiring.app, bot.wiring.console, bot.conversation.documents\n"
        f"print(' '.join(m for m in {LAZY!r} if m in sys.modules))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    assert loaded == []


def test_the_mcp_client_loads_when_asked_for() -> None:
    probe = (
        "import sys\n"
        "from agent.mcp import McpToolbox\n"
        "print(McpToolbox.__module__, 'mcp' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    assert out == ["agent.mcp.client", "True"]
