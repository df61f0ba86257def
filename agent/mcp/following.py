"""Following an MCP task past its call, without the SDK: what the host keeps and asks.

A call whose task is still working when its time is nearly up hands it off (`Handoff`) to
the host's `TaskFollower` (the bot keeps it in Redis), which polls it to its end through
`TaskPolling` (`McpToolbox`) and posts the result where the run's answer went. The bot
imports this module alone: a process without MCP servers never loads the `mcp` SDK.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

POLL_MIN = 0.05  # seconds: however eager the server, no tighter loop than this
POLL_MAX = 10.0
POLL_DEFAULT = 1.0


class FollowedTask(BaseModel):
    """A task handed off by its call, as the follower keeps it in Redis: the task, and where
    and to whom its result goes (`private_to`: the requester alone, as the run answered)."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    server: str
    tool: str
    conversation_id: str
    user_id: str
    user_name: str = ""
    private_to: str | None = None
    poll_ms: int | None = None
    ttl_ms: int | None = None
    created_at: float  # epoch seconds, as this client saw the task made


@runtime_checkable
class TaskFollower(Protocol):
    """The host's: keeps a handed-off task and delivers its result later; raises when it
    cannot keep it (then the call cancels the task, as before)."""

    async def follow(self, task: FollowedTask) -> None: ...


@dataclass(frozen=True, kw_only=True)
class TaskState:
    """What `tasks/get` says, without the SDK's types."""

    status: Literal["working", "input_required", "completed", "failed", "cancelled"]
    message: str | None
    poll_ms: int | None
    ttl_ms: int | None


class TaskPolling(Protocol):
    """Tasks of named servers (`McpToolbox`). ConnectionError: the server is not reachable;
    ToolError: it answered with an error (it does not know the task, say)."""

    async def task_state(self, server: str, task_id: str) -> TaskState: ...

    async def task_result(self, server: str, task_id: str) -> tuple[str, bool]:
        """The result's text, and whether it is an error."""
        ...

    async def cancel_task(self, server: str, task_id: str) -> None: ...


@dataclass(frozen=True, kw_only=True)
class Handoff:
    """A call that may hand its task off: `after` seconds in (before the call's own timeout),
    a task still working goes to `follow` (the task id, poll interval and ttl it has)."""

    after: float
    follow: Callable[[str, int | None, int | None], Awaitable[None]]


HANDED_OFF = (
    "The task is still running on the server. Its result will be posted in this conversation "
    "when it finishes; the user has been told. Do not call the tool again for it."
)


def interval(poll_ms: int | None) -> float:
    """Seconds until the next `tasks/get`: the server's pollInterval, bounded."""
    if poll_ms is None:
        return POLL_DEFAULT
    return min(max(poll_ms / 1000, POLL_MIN), POLL_MAX)


async def cancel_shielded(cancel: Callable[[], Awaitable[None]], within: float) -> None:
    """Run `cancel` (a request telling the server to stop a task) for at most `within` s, its errors
    dropped; shielded from the cancellation that asked for it (which is raised after)."""

    async def send() -> None:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(within):
                await cancel()

    sending = asyncio.ensure_future(send())
    try:
        await asyncio.shield(sending)
    except asyncio.CancelledError:
        await sending  # bounded by `within`
        raise
