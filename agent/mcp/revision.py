"""Which MCP revision a session speaks: 2025-11-25 or 2026-07-28, whichever a server's
entry prefers (`"protocol"`, default 2025-11-25), else the other when the server refuses it.

A 2025-11-25 session starts with the `initialize` handshake; a 2026-07-28 one with
`server/discover` (stateless: each request carries its version). What differs for Parley:

- questions mid-call: 2026-07-28 answers `input_required` with a `requestState` the server
  signs, so a question asked by a stdio server does not survive that server's restart (it
  restarts with Parley); 2025-11-25 sends `elicitation/create` during the call, which stays
  open while the question waits in the chat (agent/mcp/open_calls.py), so that server hears
  the person's answer, and a call whose question outlives it is made again only when safe;
- tool-list changes: 2026-07-28 sends them on a `subscriptions/listen` stream, opened here
  only when the server advertises `tools.listChanged` and handed to the session's handler as
  the 2025-11-25 notification would be; a server that refuses the stream is used without it
  (its tool list is read again on reconnect only);
- a result's `resultType`: 2026-07-28 says a result without one is complete, but the SDK's
  check of that revision's wire shape requires it (`completed`);
- tool parameters mirrored into HTTP headers (SEP-2243, `x-mcp-header`): 2026-07-28 only;
  the SDK drops a tool whose declarations are invalid and mirrors the parameters of the
  tools its session listed (`declares_headers`);
- progress notifications: the same in both.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack

import mcp.types as mt
from mcp import ClientSession
from mcp.client.subscriptions import SubscriptionLost, listen
from mcp.shared.exceptions import MCPError
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from agent.mcp.config import Revision, ServerConfig

log = logging.getLogger(__name__)

HEADER_KEY = "x-mcp-header"  # a parameter the client mirrors into `Mcp-Param-<name>`


async def negotiate(session: ClientSession, prefer: Revision = "2025-11-25") -> str:
    """Start the session at the preferred revision, else the other; the revision spoken."""
    steps = [session.initialize, session.discover]
    first, second = steps if prefer == "2025-11-25" else steps[::-1]
    try:
        await first()
    except (MCPError, TimeoutError) as exc:  # the server speaks only the other revision
        log.info("MCP %s refused (%s); trying the other revision", prefer, exc)
        await second()
    return str(session.protocol_version)


def is_modern(session: ClientSession) -> bool:
    return session.protocol_version in MODERN_PROTOCOL_VERSIONS


async def open_session(
    stack: AsyncExitStack,
    session: ClientSession,
    config: ServerConfig,
    on_message: Callable[[mt.ToolListChangedNotification], Awaitable[None]],
) -> str:
    """Negotiate, and while `stack` is open hand a 2026-07-28 server's tool-list changes to
    `on_message` as the 2025-11-25 notification (which that revision sends on the session)."""
    version = await negotiate(session, config.protocol)
    if is_modern(session) and announces_tool_changes(session):
        try:
            await stack.enter_async_context(_tool_changes(session, on_message))
        except (MCPError, SubscriptionLost, TimeoutError) as exc:
            log.warning(
                "MCP server refused subscriptions/listen (%s); its tool list is not followed",
                str(exc)[:200],
            )
    return version


def announces_tool_changes(session: ClientSession) -> bool:
    """The server says it tells of tool-list changes (`capabilities.tools.listChanged`)."""
    caps = session.server_capabilities
    tools = caps.tools if caps is not None else None
    return tools is not None and tools.list_changed is True


@contextlib.asynccontextmanager
async def _tool_changes(
    session: ClientSession, on_message: Callable[[mt.ToolListChangedNotification], Awaitable[None]]
) -> AsyncIterator[None]:
    async with listen(session, tools_list_changed=True) as subscription:

        async def follow() -> None:
            async for _ in subscription:
                await on_message(mt.ToolListChangedNotification())

        task = asyncio.create_task(follow(), name="mcp:tool-changes")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def completed(
    session: ClientSession, tool: str, refused: ValidationError
) -> mt.CallToolResult | None:
    """The `tools/call` result the SDK refused only for lacking `resultType`, read as
    complete as 2026-07-28 says (and checked against the tool's output schema as the SDK
    would); None when anything else is wrong with it."""
    errors = refused.errors()
    raw = errors[0].get("input") if errors else None
    if not isinstance(raw, dict) or "resultType" in raw:
        return None
    if any(e["type"] != "missing" or e["loc"][-1:] != ("resultType",) for e in errors):
        return None
    try:
        result = mt.CallToolResult.model_validate({**raw, "resultType": "complete"}, by_name=False)
    except ValidationError:
        return None
    if not result.is_error:
        await session.validate_tool_result(tool, result)
    return result


def declares_headers(tool: mt.Tool) -> bool:
    """The tool's schema names a parameter to mirror into an HTTP header, anywhere in it."""
    return HEADER_KEY in json.dumps(tool.input_schema or {})
