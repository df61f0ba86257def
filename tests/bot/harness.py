"""An in-process runtime on the real Redis, driven by a scripted model and a recording adapter."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis.asyncio as aioredis

from adapters.base import ConversationKey, Inbound, OutboundMessage
from agent.builtin_tools import builtin_registry
from agent.loop import Agent, AgentConfig
from agent.mcp.following import TaskPolling
from agent.outcomes import Outcome
from agent.protocols import MemoryStore, Scheduler
from agent.tools import ToolRegistry, ToolSource, tool
from bot.config import Settings
from bot.features.reoffers import PromptOffers
from bot.ops.health import Health
from bot.ops.shutdown import describe
from bot.runtime.worker import GROUP
from bot.wiring.runtime import Runtime, build_runtime
from tests.agent.scripted import ScriptedModel
from tests.bot.recording import Posted, RecordingAdapter, message

if TYPE_CHECKING:
    from agent.mcp import Credentials, McpToolbox, ServerConfig, Timing


def settings(**runtime: Any) -> Settings:
    values = {"PARLEY_RECLAIM_IDLE": 0.5, "PARLEY_LOCK_LEASE": 2, **runtime}
    return Settings.load(env_file=None, runtime=values)


def with_approvers(config: Settings, *approvers: str) -> Settings:
    """`config` with these approvers (user ids, or user groups such as S-admins)."""
    access = config.access.model_copy(update={"approvers": list(approvers)})
    return config.model_copy(update={"access": access})


def email_tool() -> tuple[ToolRegistry, list[str]]:
    """The built-in tools and `send_email`, which needs approval; the addresses it sent to."""
    sent: list[str] = []

    @tool(side_effects=True, describe=lambda args: f"Send an email to {args['to']}")
    async def send_email(to: str) -> str:
        """Send an email.

        Args:
            to: the address
        """
        sent.append(to)
        return f"sent to {to}"

    registry = builtin_registry()
    registry.register(send_email)
    return registry, sent


@dataclass
class Harness:
    redis: aioredis.Redis
    runtime: Runtime
    model: ScriptedModel
    adapter: RecordingAdapter

    async def submit(self, event: Inbound) -> bool:
        return await self.runtime.inbox.submit(event)

    async def handle(self, event: Inbound, within: float = 10.0) -> None:
        """Submit `event` and wait until it (and all before it) is handled."""
        await self.submit(event)
        await self.settle(within)

    async def settle(self, within: float = 10.0) -> None:
        """Wait until every queued entry is handled and acknowledged."""
        deadline = time.monotonic() + within
        while True:
            groups = await self.redis.xinfo_groups(self.runtime.keys.inbox)
            group = next((g for g in groups if g["name"] in (GROUP, GROUP.encode())), None)
            idle = group is not None and not group["pending"] and not group["lag"]
            if idle and not self.runtime.worker._tasks:
                return
            assert time.monotonic() < deadline, (
                f"runtime did not settle: {group}; running: {describe(self.runtime.worker._tasks)}"
            )
            await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def running(
    redis: aioredis.Redis,
    model: ScriptedModel,
    *,
    adapter: RecordingAdapter | None = None,
    tools: ToolRegistry | None = None,
    memory: MemoryStore | None = None,
    config: Settings | None = None,
    tool_source: ToolSource | None = None,
    health: Health | None = None,
    after_run: Callable[[Outcome], Awaitable[OutboundMessage | None]] | None = None,
    mcp_tasks: TaskPolling | None = None,
    offers: PromptOffers | None = None,
) -> AsyncIterator[Harness]:
    adapter = adapter or RecordingAdapter()
    registry = tools or builtin_registry()
    config = config or settings()

    def make_agent(scheduler: Scheduler) -> Agent:
        return Agent(
            model,
            registry,
            memory=memory,
            scheduler=scheduler,
            config=AgentConfig(
                backoff_base=0.01, backoff_max=0.02, stream=config.streaming.enabled
            ),
            tool_source=tool_source,
        )

    runtime = build_runtime(
        redis,
        config,
        {adapter.platform: adapter},
        make_agent,
        memory=memory,
        after_run=after_run,
        poll=0.05,
        health=health,
        mcp_tasks=mcp_tasks,
        offers=offers,
    )
    runtime.worker.block_ms = 50
    stop = asyncio.Event()
    task = asyncio.create_task(runtime.run(stop))
    try:
        await runtime.worker.ensure_group()
        yield Harness(redis=redis, runtime=runtime, model=model, adapter=adapter)
    finally:
        stop.set()
        await task


@contextlib.asynccontextmanager
async def parley(
    redis: aioredis.Redis,
    model: ScriptedModel,
    *,
    server: ServerConfig | None = None,
    name: str = "test",
    timing: Timing | None = None,
    credentials: Credentials | None = None,
    toolbox: McpToolbox | None = None,
    follow: bool = False,
    chat: Any = None,
    paired: Mapping[str, Iterable[str]] | None = None,
    **options: Any,
) -> AsyncIterator[Harness]:
    """One Parley process on the in-process runtime (`running`, which takes `options`).

    With `server`: its own connection to that MCP server (called `name`; `credentials` for a
    per-user one). With `toolbox`: a started one it shares with other processes. `follow`:
    it follows the tasks that outlive their call there. With `chat`: behind that real chat
    adapter (fed into the inbox, started, polling when it polls, stopped after). `paired`:
    platform -> the people already let in (in pairing mode), as if each had paired.
    """
    async with contextlib.AsyncExitStack() as stack:
        if server is not None:
            from agent.mcp import McpConfig, McpToolbox, Timing

            timing = timing or Timing(
                start_timeout=30, call_timeout=30, retry_base=0.2, retry_max=1.0
            )
            config = McpConfig(mcpServers={name: server})
            toolbox = McpToolbox(config, timing, credentials=credentials)
            await toolbox.start()
            stack.push_async_callback(toolbox.stop)
        if toolbox is not None:
            options["tool_source"] = toolbox.source()
            if follow:
                from agent.mcp import ServerTasks

                options["mcp_tasks"] = ServerTasks(toolbox)
        if chat is not None:
            options["adapter"] = chat
        harness = await stack.enter_async_context(running(redis, model, **options))
        for platform, people in (paired or {}).items():
            await redis.sadd(harness.runtime.keys.paired(platform), *people)
        if chat is not None:
            chat.handler = harness.runtime.inbox.submit
            await chat.start()
            stack.push_async_callback(chat.stop)
            if hasattr(chat, "start_polling"):  # Slack's events come to its route instead
                await chat.start_polling()
        yield harness


async def reply_to(harness: Harness, chat: ConversationKey, text: str, **fields: Any) -> str:
    """What Parley posted in answer to one message (a command when it starts with /)."""
    command, _, args = text[1:].partition(" ") if text.startswith("/") else (None, "", "")
    before = len(harness.adapter.posted)
    await harness.submit(message(chat, text, command=command, args=args, **fields))
    await harness.settle()
    return "\n".join(p.message.text for p in harness.adapter.posted[before:])


async def prompted(harness: Harness, chat: ConversationKey, text: str, **fields: Any) -> Posted:
    """The first thing Parley posted in `chat` once this message was handled (in a fresh
    chat: its question or its approval prompt)."""
    await harness.submit(message(chat, text, **fields))
    await harness.settle()
    return harness.adapter.in_conversation(chat)[0]
