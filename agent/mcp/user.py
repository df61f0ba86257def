"""Servers with `"auth": "user"`: every call carries the requester's own token.

Nothing is shared between people: there is no standing session, each call opens a
Streamable HTTP session with the requester's bearer token and closes it, and the tools a run
is offered are bound to that run's requester. The server's tool list is cached from the
first listing a connected person's run made, so someone who has not connected yet is offered
the same tools; calling one asks them to connect (`QuestionRequired`, a **Connect <server>**
button) instead of running. With no list yet, one stand-in tool, `<server>__connect`, does.
A call the server refuses (401, or 403 `insufficient_scope`) asks again, handing the host the
server's challenge (`Refusal`). Where tokens come from (stored, refreshed, encrypted) is the
host's `Credentials`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import httpx2
import mcp.types as mt
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

import agent.mcp.task_extension as task_extension
from agent.deferred import new_id
from agent.mcp.config import ServerConfig, Timing
from agent.mcp.elicitation import Answers, Progress, call_tool, send_call, task_of
from agent.mcp.open_calls import OpenCall, OpenCalls
from agent.mcp.pins import Classes, Pins, keep
from agent.mcp.revision import declares_headers, is_modern, negotiate
from agent.mcp.tools import BadSchema, McpTool, list_all, pin, tool_name
from agent.protocols import RunContext
from agent.tools import QuestionRequired, Tool, ToolContext, ToolError

log = logging.getLogger(__name__)

CONNECT = (
    "To do this I need your {server} account. Connect it with the **Connect {server}** "
    "button I sent you privately; I'll carry on once you have."
)
STAND_IN = "connect"


@dataclass(frozen=True, kw_only=True)
class Refusal:
    """A server's 401 or 403 to a request made with someone's token."""

    status: int
    www_authenticate: str = ""


class Refused(Exception):
    def __init__(self, refusal: Refusal) -> None:
        super().__init__(f"HTTP {refusal.status}")
        self.refusal = refusal


class Credentials(Protocol):
    """The host's store of people's tokens and its way of asking them to connect."""

    async def token(self, server: str, run: RunContext) -> str | None:
        """The requester's access token for `server`, refreshed if close to expiry; None
        when they have not connected (or can no longer be refreshed); ConnectionError when
        it needs refreshing and the sign-in is away."""
        ...

    async def connect_link(
        self, server: str, run: RunContext, question_id: str, refusal: Refusal | None = None
    ) -> str:
        """An authorization URL bound to this person, this conversation and the question
        the run will wait on (`refusal`: what the server answered their token with); raises
        ConnectionError when the server's sign-in is away, ToolError when it cannot be
        asked (again)."""
        ...


class UserServer:
    """One `"auth": "user"` server: its cached tool list and calls made as the requester."""

    def __init__(
        self,
        name: str,
        config: ServerConfig,
        credentials: Credentials,
        timing: Timing,
        pins: Pins | None = None,
    ) -> None:
        self.name = name
        self.pins = pins  # approval classes as first listed, across restarts
        self._pinned: Classes = {}
        self._pins_known = False  # the kept classes were read since the latest listing
        self.config = config
        self.credentials = credentials
        self.call_timeout = timing.call_timeout
        # each call's session stays open while its question waits; the questions of a
        # session are its one call's
        self.calls = OpenCalls(timing.question_wait)
        self.listed: list[mt.Tool] = []  # from the latest listing any connected person made
        self.error: str | None = None

    async def tools_for(self, run: RunContext) -> list[Tool]:
        if not run.asked:  # a trigger in someone's name never acts with their own account
            return []
        try:
            token = await self.credentials.token(self.name, run)
        except ConnectionError as exc:  # connected, but the token cannot be renewed now
            away = _away(str(exc))
            return await self._pin(self._made(lambda remote: self._tool(remote, away)))
        if token is None:
            return self._connect_first()
        if not self.listed:
            try:
                self.listed = await self._session(token, list_all)
                self.error = None
                self._pins_known = False
            except Refused as refused:
                return self._connect_first(refused.refusal)
            except (ConnectionError, ToolError) as exc:
                self.error = str(exc)
                log.warning("MCP server %s: could not list its tools (%s)", self.name, exc)
                return []

        async def caller(
            tool: str,
            args: dict[str, Any],
            answers: Answers | None,
            progress: Progress | None,
            handoff: Any = None,  # not followed: a per-user server's calls are ordinary ones
        ) -> mt.CallToolResult | mt.InputRequiredResult:

            def on(call: OpenCall, given: Answers | None) -> Any:
                async def use(session: ClientSession) -> Any:
                    await self._mirrored(session, tool)
                    if (waiting := task_of(given)) is not None:  # a task's question, answered
                        task_id, responses = waiting
                        return await task_extension.answer(
                            session, tool, task_id, responses, call.progress
                        )
                    if given is None and task_extension.offers_extension(session):
                        # a task is followed to its end on this call's session (not handed
                        # off: the session is this call's alone)
                        return await task_extension.call(session, tool, args, call.progress)
                    return await send_call(session, call, given, tool=tool, args=args)

                return self._session(token, use, self.calls)

            try:
                return await call_tool(self.calls, on, answers, progress, tool)
            except Refused as refused:  # the token is refused, or too narrow: ask again
                raise await self.ask_to_connect(run, refused.refusal) from None

        return await self._pin(self._made(lambda remote: self._tool(remote, caller)))

    async def _mirrored(self, session: ClientSession, tool: str) -> None:
        """2026-07-28 (SEP-2243): the SDK mirrors a tool's `x-mcp-header` parameters into
        `Mcp-Param-*` headers only for a tool this session listed, and each call here is a
        session of its own, so such a tool is listed first; one the listing now leaves out
        (its header declarations are invalid, the SDK drops it) is not called."""
        listed = next((t for t in self.listed if t.name == tool), None)
        if not is_modern(session) or listed is None or not declares_headers(listed):
            return
        self.listed = await list_all(session)
        if not any(t.name == tool for t in self.listed):
            raise ToolError(f"{self.name} no longer offers {tool} (its header declarations)")

    async def _pin(self, tools: list[Tool]) -> list[Tool]:
        """Hold each tool to its approval class as first listed (`pins.keep`); the kept
        classes are read once per listing."""
        made = [tool for tool in tools if isinstance(tool, McpTool)]
        if not self._pins_known:
            self._pins_known = await keep(self.pins, self.name, made, self._pinned)
        for tool in made:
            pin(tool, self._pinned)
        return tools

    def _tool(self, remote: mt.Tool, caller: Any) -> McpTool:
        return McpTool(
            server=self.name,
            remote=remote,
            caller=caller,
            approval=self.config.approval,
            timeout=self.config.timeout or self.call_timeout,
            standing=self.config.standing,
        )

    def names(self) -> list[tuple[str, str]]:
        """The names the model is offered for this server's tools, each with the server's
        own name for it (the stand-in's until a listing is cached)."""
        remotes = [tool.name for tool in self.listed if self.config.offers(tool.name)]
        return [(tool_name(self.name, remote), remote) for remote in remotes or [STAND_IN]]

    async def ask_to_connect(
        self, run: RunContext, refusal: Refusal | None = None
    ) -> QuestionRequired:
        """The question that sends the requester a Connect link and makes the run wait."""
        question_id = new_id()
        try:
            url = await self.credentials.connect_link(self.name, run, question_id, refusal)
        except ConnectionError:
            raise ToolError(f"{self.name}'s sign-in cannot be reached right now") from None
        return QuestionRequired(
            CONNECT.format(server=self.name),
            question_id=question_id,
            label=f"Connect {self.name}",
            url=url,
        )

    def _connect_first(self, refusal: Refusal | None = None) -> list[Tool]:
        if not self.listed:
            stand_in = mt.Tool(
                name=STAND_IN,
                description=f"Use the user's own {self.name} account. Call this to ask them "
                f"to connect it; {self.name}'s tools are offered once they have.",
                input_schema={"type": "object", "properties": {}},
            )
            return [ConnectFirst(self, stand_in, refusal)]
        return self._made(lambda remote: ConnectFirst(self, remote, refusal))

    def _made(self, make: Any) -> list[Tool]:
        tools: list[Tool] = []
        for remote in self.listed:
            if not self.config.offers(remote.name):
                continue
            try:
                tools.append(make(remote))
            except BadSchema:
                continue  # left out, as for any server
        return tools

    async def _session(self, token: str, use: Any, calls: OpenCalls | None = None) -> Any:
        """Open a session as the token's owner, do one thing, close it."""
        assert self.config.url is not None
        headers = {**self.config.headers, "Authorization": f"Bearer {token}"}
        refused: list[Refusal] = []

        async def note(response: httpx2.Response) -> None:
            if response.status_code in (401, 403):
                challenge = response.headers.get("www-authenticate", "")
                refused.append(Refusal(status=response.status_code, www_authenticate=challenge))

        try:
            async with (
                httpx2.AsyncClient(
                    headers=headers,
                    timeout=httpx2.Timeout(self.call_timeout, read=None),
                    event_hooks={"response": [note]},
                ) as client,
                streamable_http_client(self.config.url, http_client=client) as (read, write),
                ClientSession(
                    read,
                    write,
                    elicitation_callback=calls,
                    **task_extension.session_options(),  # opts into tasks as a shared one
                ) as session,
            ):
                await negotiate(session, self.config.protocol)
                return await use(session)
        except MCPError as exc:
            if refused:
                raise Refused(refused[-1]) from None
            if exc.code != mt.CONNECTION_CLOSED:
                raise ToolError(f"the server answered: {exc.message}") from None
            raise ConnectionError(f"MCP server {self.name} went away") from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, httpx2.TransportError):
            if refused:
                raise Refused(refused[-1]) from None
            raise ConnectionError(f"MCP server {self.name} is not available") from None
        except BaseExceptionGroup as group:  # the SDK's task group wraps a refused request
            if refused:
                raise Refused(refused[-1]) from None
            raise ConnectionError(f"MCP server {self.name} is not available") from group


class ConnectFirst(McpTool):
    """A per-user tool of someone not connected yet: calling it asks them to connect.

    Read-only whatever its annotations say: it changes nothing, and the real call is made
    (and approved, if it needs approval) once they have connected."""

    def __init__(self, server: UserServer, remote: mt.Tool, refusal: Refusal | None = None) -> None:
        super().__init__(server=server.name, remote=remote, caller=_never)
        self.side_effects = False
        self.retries = 0
        self._server = server
        self._refusal = refusal

    async def __call__(self, args: dict[str, Any], context: ToolContext) -> Any:
        raise await self._server.ask_to_connect(context.run, self._refusal)


async def _never(tool: str, args: dict[str, Any], *_: Any, **__: Any) -> mt.CallToolResult:
    raise ToolError("not connected")


def _away(reason: str) -> Any:
    async def caller(tool: str, args: dict[str, Any], *_: Any, **__: Any) -> mt.CallToolResult:
        raise ConnectionError(reason)

    return caller
