"""How a shared server is reached: its stdio process (isolated, its stderr relayed to the log)
or its Streamable HTTP URL (with the configured headers; a refusal's HTTP status is noted,
as the SDK's MCPError does not carry it)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

import httpx2
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from agent.isolation import isolated
from agent.mcp.config import ServerConfig, Timing
from agent.mcp.stderr import relayed_stderr


def transport(
    name: str,
    config: ServerConfig,
    timing: Timing,
    stack: AsyncExitStack,
    refused: Callable[[str], None],
) -> Any:
    """The SDK's transport context for the server; `refused` hears "HTTP <status>"."""
    if config.command is not None:
        command, args = isolated(config.command, config.args)  # it cannot read Parley
        params = StdioServerParameters(
            command=command,
            args=args,
            env={**config.env} or None,
            cwd=config.cwd,
        )
        return stdio_client(params, errlog=relayed_stderr(stack, name))
    assert config.url is not None

    async def note_refusal(response: httpx2.Response) -> None:
        if response.status_code >= 400:
            refused(f"HTTP {response.status_code}")

    client = httpx2.AsyncClient(
        headers=config.headers,
        timeout=httpx2.Timeout(timing.call_timeout, read=None),
        event_hooks={"response": [note_refusal]},
    )
    stack.push_async_callback(client.aclose)
    return streamable_http_client(config.url, http_client=client)


def describe(exc: BaseException, refusal: str | None = None) -> str:
    """Why a server is down, in a few words (`refusal`: the HTTP status it refused with)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "did not start in time"
    if isinstance(exc, FileNotFoundError | PermissionError):
        return f"cannot run its command ({type(exc).__name__})"
    if isinstance(exc, MCPError):
        return f"refused: {refusal}" if refusal else f"MCPError: {str(exc)[:200]}"
    return type(exc).__name__
