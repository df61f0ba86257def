"""What a service process loads only when it needs it: the MCP SDK (with the web server it
brings along, ~18 MB resident) only where MCP servers are configured, and pypdf only in the
child process that reads a PDF."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.process

LAZY = ("mcp", "starlette", "uvicorn", "pypdf")
WORKER_ONLY = ("anthropic", "ollama", "numpy", "redisvl")


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


def test_a_gateway_does_not_load_the_model_sdks_or_the_memory_index() -> None:
    # about 3.5 s of CPU per process, more than half of it the Anthropic SDK: five processes
    # starting at once on a loaded 2-core machine took over 40 s to say they were running
    probe = (
        "import sys\n"
        "import bot.cli, bot.wiring.app\n"
        "print(' '.join(m for m in sys.modules if m.split('.')[0] in WORKER_ONLY))\n"
    ).replace("WORKER_ONLY", repr(WORKER_ONLY))
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    assert loaded == []
    probe = "import sys\nimport bot.wiring.work\nprint('anthropic' in sys.modules)\n"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    assert out == ["True"]  # a worker still has them
