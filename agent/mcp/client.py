"""Connections to MCP servers, each kept alive by its own supervisor task.

A supervisor connects (stdio or Streamable HTTP, through the `mcp` SDK), lists the tools,
then waits: for a `tools/list_changed` notification (it lists again), for a failed call or
ping (it reconnects), or for `stop`. A server that cannot start or dies is retried after
the loops' backoff (`loops.Backoff`: exponential, jittered, reset once connected); a request
to a server that is down wakes its supervisor from that pause and waits up to the start
timeout for it. One server's trouble never touches another's.

Errors::

    ConnectionError    (builtin) the server is not reachable; the agent's executor retries
                       read-only calls on it
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, TypeVar

import anyio
import httpx2
import mcp.types as mt
from mcp import ClientSession
from mcp.client.session import IncomingMessage
from mcp.shared.exceptions import MCPError

import agent.mcp.task_extension as task_extension
from agent.mcp.config import McpConfig, ServerConfig, Timing
from agent.mcp.elicitation import Answers, Progress, call_tool, send_call, task_of
from agent.mcp.following import Handoff
from agent.mcp.open_calls import OpenCalls
from agent.mcp.pins import Pins, keep
from agent.mcp.revision import open_session
from agent.mcp.tasks import allows_task, call_as_task, offers_tasks
from agent.mcp.tools import McpTool, build_tools, list_all
from agent.mcp.transport import describe, transport
from agent.mcp.user import Credentials, UserServer
from agent.protocols import RunContext
from agent.tools import Tool, ToolError, ToolSource
from loops import Backoff, Running, pause

log = logging.getLogger(__name__)

State = Literal["starting", "ready", "down", "stopped"]
T = TypeVar("T")
GONE = (anyio.ClosedResourceError, anyio.BrokenResourceError, httpx2.TransportError, OSError)


class McpServer:
    """One configured server: its connection, state and current tools."""

    def __init__(
        self,
        name: str,
        config: ServerConfig,
        timing: Timing = Timing(),
        pins: Pins | None = None,
    ) -> None:
        self.name = name
        self.pins = pins  # where the approval classes outlive the process
        self.config = config
        self.timing = timing
        self.state: State = "starting"
        self.error: str | None = None
        self.tools: list[McpTool] = []
        self.skipped: dict[str, str] = {}  # tools left out: name → why
        self.protocol: str | None = None  # the MCP revision the session speaks
        self._session: ClientSession | None = None
        self._questions = OpenCalls(timing.question_wait)  # calls that may ask mid-call
        self._task_tools: set[str] = set()  # tools the server may run as MCP tasks
        self._pinned: dict[str, tuple[bool, bool]] = {}  # approval classes as first listed
        self._loops = Running(grace=timing.stop_timeout)  # the supervisor's lifecycle
        self._signal = asyncio.Event()  # something for the supervisor to look at
        self._change = asyncio.Event()  # set (and replaced) whenever the state changes
        self._attempt = 0  # connection attempts so far
        self._failed = 0  # the latest attempt that failed
        self._connecting = False
        self._broken = False
        self._relist = False
        self._closing = False
        self._refusal: str | None = None  # the HTTP status the SDK's MCPError does not carry

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if not self._loops.tasks:
            self._loops.start(self._supervise()).set_name(f"mcp:{self.name}")

    async def wait_ready(self, within: float) -> bool:
        """Wait (at most `within`) for a live session, from the attempt under way or the next.

        Returns False as soon as that attempt fails, rather than waiting out the backoff.
        """
        target = self._attempt if self._connecting else self._attempt + 1
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                while not self._usable() and self._failed < target and not self._closing:
                    if self.state == "down" and not self._connecting:
                        # wake it (again): a wake given while it was still tearing the
                        # broken session down is cleared before it goes "down"
                        self._signal.set()
                    await self._change.wait()
        return self._usable()

    def _usable(self) -> bool:
        return self.state == "ready" and not self._broken and self._session is not None

    def _set_state(self, state: State) -> None:
        self.state = state
        self._change.set()
        self._change = asyncio.Event()

    async def stop(self) -> None:
        """Close the session and let the transport stop the server; cancel if that hangs."""
        self._closing = True
        self._signal.set()
        await self._questions.close()
        if await self._loops.close():
            log.error("MCP server %s ignored its cancellation; left behind", self.name)
        self._set_state("stopped")

    async def _supervise(self) -> None:
        backoff = Backoff(self.timing.retry_base, self.timing.retry_max)
        while not self._closing:
            try:
                await self._connect_and_serve()
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # an SDK failure may arrive as an ExceptionGroup
                self.error = describe(exc, self._refusal)
            if self._closing:
                break
            if self.state == "ready":  # a new outage: its first retry comes soon
                backoff.reset()
            self._session, self._connecting, self._failed = None, False, self._attempt
            self._signal.clear()  # before "down": a call from now on wakes the wait below
            self._set_state("down")
            delay = backoff.next()
            if backoff.failures == 1:  # one line per outage, however many retries fail
                log.warning(
                    "MCP server %s is down (%s); retrying in %.1f s or on next use",
                    self.name,
                    self.error or "connection closed",
                    delay,
                )
            await pause(self._signal, delay)  # woken early by a call that needs the server
        self._set_state("stopped")

    async def _connect_and_serve(self) -> None:
        self._attempt += 1
        self._connecting = True
        self._refusal = None
        self._broken = self._relist = False
        if self.state != "down":  # a retry after a failure is still down until it connects
            self._set_state("starting")
        async with AsyncExitStack() as stack:
            async with asyncio.timeout(self.timing.start_timeout):
                reach = transport(self.name, self.config, self.timing, stack, self._refused)
                read, write = await stack.enter_async_context(reach)
                session = await stack.enter_async_context(
                    ClientSession(
                        read,
                        write,
                        message_handler=self._on_message,
                        elicitation_callback=self._questions,
                        **task_extension.session_options(),
                    )
                )
                self.protocol = await open_session(stack, session, self.config, self._on_message)
                await self._list_tools(session)
            recovering = self.error is not None
            self._session, self.error, self._connecting = session, None, False
            self._set_state("ready")
            log.info(
                "MCP server %s %s: %d tools",
                self.name,
                "is back" if recovering else "ready",
                len(self.tools),
            )
            await self._serve(session)

    def _refused(self, status: str) -> None:
        self._refusal = status

    async def _serve(self, session: ClientSession) -> None:
        while not self._closing:
            self._signal.clear()  # then look at the flags: nothing set before this is missed
            if self._broken:
                return
            if self._relist:
                self._relist = False
                await self._list_tools(session)
                log.info("MCP server %s: tool list changed, now %d", self.name, len(self.tools))
                continue
            try:
                async with asyncio.timeout(self.timing.ping_interval):
                    await self._signal.wait()
            except TimeoutError:
                try:
                    async with asyncio.timeout(self.timing.start_timeout):
                        await session.send_ping()
                except Exception as exc:
                    self.error = f"no answer to ping ({type(exc).__name__})"
                    return

    async def _list_tools(self, session: ClientSession) -> None:
        listed = await list_all(session)
        self._task_tools = {tool.name for tool in listed if allows_task(tool)}
        # checking schemas is the server's CPU work: off the event loop, in bounded time
        async with asyncio.timeout(self.timing.start_timeout):
            tools, skipped = await asyncio.to_thread(
                build_tools,
                self.name,
                self.config,
                [tool for tool in listed if self.config.offers(tool.name)],
                self.call,
                timeout=self.config.timeout or self.timing.call_timeout,
                reported=self.skipped,
            )
        await keep(self.pins, self.name, tools, self._pinned)
        self.tools, self.skipped = tools, skipped

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, mt.ToolListChangedNotification):
            self._relist = True
            self._signal.set()

    # --- calls -------------------------------------------------------------------------------

    async def call(
        self,
        tool: str,
        args: dict[str, Any],
        answers: Answers | None = None,
        progress: Progress | None = None,
        handoff: Handoff | None = None,
    ) -> mt.CallToolResult | mt.InputRequiredResult:
        """Call a tool (with `answers`, again; a long task may be handed off)."""

        async def send(session: ClientSession) -> mt.CallToolResult | mt.InputRequiredResult:
            if (waiting := task_of(answers)) is not None:  # a task's question, answered
                return await task_extension.answer(session, tool, *waiting, progress, handoff)
            if tool in self._task_tools and answers is None and offers_tasks(session):
                return await call_as_task(session, tool, args, progress, handoff)
            if answers is None and task_extension.offers_extension(session):
                return await task_extension.call(session, tool, args, progress, handoff)
            on = partial(send_call, session, tool=tool, args=args)
            return await call_tool(self._questions, on, answers, progress, tool)

        return await self.request(send)

    async def request(self, send: Callable[[ClientSession], Awaitable[T]]) -> T:
        """`send` on the live session; ConnectionError: unreachable, ToolError: refused."""
        if not self._usable():
            self._signal.set()  # restart now rather than after the backoff
            if not await self.wait_ready(self.timing.start_timeout):
                raise ConnectionError(f"MCP server {self.name} is not available")
        session = self._session
        assert session is not None
        try:
            return await send(session)
        except MCPError as exc:
            if exc.code != mt.CONNECTION_CLOSED:  # an answer: the server is alive
                raise ToolError(f"the server answered: {exc.message}") from None
            self.error = "connection closed"
        except GONE as exc:
            self.error = f"call failed ({type(exc).__name__})"
        self._broken = True
        self._signal.set()
        raise ConnectionError(f"MCP server {self.name} went away")


class McpToolbox:
    """Every configured server, started together; the tools a conversation may use."""

    def __init__(
        self,
        config: McpConfig,
        timing: Timing = Timing(),
        credentials: Credentials | None = None,
        pins: Pins | None = None,
    ) -> None:
        self.timing = timing
        enabled = config.enabled()
        self.servers = {
            name: McpServer(name, server, timing, pins)
            for name, server in enabled.items()
            if server.auth is None
        }
        # `"auth": "user"`: no shared connection; each run calls as its requester
        self.personal: dict[str, UserServer] = {}
        for name, wanted in enabled.items():
            if wanted.auth != "user":
                continue
            if credentials is None:
                log.warning(
                    "MCP server %s needs each user's own account, which needs "
                    "PARLEY_SECRET_KEY and PARLEY_PUBLIC_URL; it is left out",
                    name,
                )
                continue
            self.personal[name] = UserServer(name, wanted, credentials, timing, pins)
        self._reported: set[str] = set()  # collisions already logged
        for name, server in self.servers.items():
            if server.config.approval == "never":
                log.warning(
                    "MCP server %s: approval is 'never', so its tools run without asking", name
                )

    def launch(self) -> None:
        """Start every server in the background; their tools appear as each one is ready."""
        for server in self.servers.values():
            server.start()

    async def start(self, within: float | None = None) -> None:
        """Start every server in parallel; wait up to the start timeout (or `within`)."""
        self.launch()
        limit = self.timing.start_timeout if within is None else within
        waits = [s.wait_ready(limit) for s in self.servers.values()]
        ready = await asyncio.gather(*waits)
        log.info("MCP servers: %d of %d ready", sum(ready), len(ready))

    async def stop(self) -> None:
        await asyncio.gather(*(server.stop() for server in self.servers.values()))

    def collisions(self) -> dict[str, list[str]]:
        """Names the model would see for more than one server's tool (`a` + `b__c` and
        `a__b` + `c` are both `a__b__c`; a per-user server's by its cached listing): name →
        `server: tool` of each. None is offered: a call must reach the tool the model meant."""
        owners: dict[str, list[str]] = {}
        named = [(s.name, t.name, t.remote_name) for s in self.servers.values() for t in s.tools]
        named += [(p.name, *pair) for p in self.personal.values() for pair in p.names()]
        for server, name, remote in named:
            owners.setdefault(name, []).append(f"{server}: {remote}")
        clashes = {name: who for name, who in owners.items() if len(who) > 1}
        for name in sorted(clashes.keys() - self._reported):
            log.warning(
                "MCP tools %s would both be called %s; neither is offered (rename a server)",
                " and ".join(clashes[name]),
                name,
            )
        self._reported = set(clashes)
        return clashes

    def tools_for(self, context: RunContext) -> Iterable[Tool]:
        clashes = self.collisions()
        for server in self.servers.values():
            if server.config.allows(
                context.platform, context.chat_id, context.user_id, context.team_id
            ):
                yield from (tool for tool in server.tools if tool.name not in clashes)

    def status(self) -> dict[str, McpServer]:
        return dict(self.servers)

    def source(self) -> ToolSource:
        """Every server's tools for a run: the shared ones and, as its requester, the
        per-user ones."""
        return _Offered(self)

    async def personal_tools(self, context: RunContext) -> list[Tool]:
        tools: list[Tool] = []
        for server in self.personal.values():
            if server.config.allows(
                context.platform, context.chat_id, context.user_id, context.team_id
            ):
                tools += await server.tools_for(context)
        clashes = self.collisions()  # after listing: a first listing may bring new names
        return [tool for tool in tools if tool.name not in clashes]


@dataclass(frozen=True)
class _Offered:
    toolbox: McpToolbox

    async def tools_for(self, context: RunContext) -> Iterable[Tool]:
        shared = list(self.toolbox.tools_for(context))
        return shared + await self.toolbox.personal_tools(context)
