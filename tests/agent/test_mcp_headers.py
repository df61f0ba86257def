"""SEP-2243 (2026-07-28): a tool's `x-mcp-header` parameters go out as `Mcp-Param-*` HTTP
headers, which the `mcp` SDK's server checks against the body. A real SDK server over
Streamable HTTP (tests/fakes/mcp_server.py `locate`), called as a shared server and as a
per-user one (a session of its own per call)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agent.deps import ToolContext
from agent.mcp import McpConfig, McpToolbox, ServerConfig, Timing
from agent.mcp.user import UserServer
from agent.tools import Tool
from tests.agent.mcp_people import PERSON, TOKEN, OneToken
from tests.fakes.mcp_process import http_server

pytestmark = pytest.mark.process

TIMING = Timing(start_timeout=30, call_timeout=30, retry_base=0.2, retry_max=1.0)
HOSTILE = "eu west\r\nAuthorization: Bearer stolen"  # a value that would split a header


@pytest.fixture
async def url() -> AsyncIterator[str]:
    with http_server(TOKEN) as found:
        yield found


def locate(tools: list[Tool]) -> Tool:
    return next(tool for tool in tools if tool.name == "geo__locate")


async def test_a_shared_servers_call_mirrors_its_header_parameters(url: str) -> None:
    config = ServerConfig(
        url=url, headers={"Authorization": f"Bearer {TOKEN}"}, protocol="2026-07-28"
    )
    box = McpToolbox(McpConfig(mcpServers={"geo": config}), TIMING)
    await box.start()
    try:
        tool = locate(list(box.tools_for(PERSON)))
        said = await tool({"region": "us-west1"}, ToolContext(run=PERSON))
        assert said == "located us-west1; header 'us-west1'"
        # a value that is no plain header value goes Base64-encoded, never as a second header
        said = await tool({"region": HOSTILE}, ToolContext(run=PERSON))
        assert said.startswith(f"located {HOSTILE}; header '=?base64?")
    finally:
        await box.stop()


async def test_a_per_user_servers_call_mirrors_them_on_its_own_session(url: str) -> None:
    # each call opens a session of its own: without listing on it, the SDK mirrors nothing
    # and the server refuses the call
    config = ServerConfig(url=url, auth="user", protocol="2026-07-28")
    server = UserServer("geo", config, OneToken(), TIMING)
    tool = locate(await server.tools_for(PERSON))
    said = await tool({"region": "us-west1"}, ToolContext(run=PERSON))
    assert said == "located us-west1; header 'us-west1'"
