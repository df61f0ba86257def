"""What an adapter can do is declared on `ChatAdapter` with a default, never probed.

A platform that lacks a capability inherits the default, and the service calls it without
asking first: no stream, no time zone, nobody left, no session status, plain `/help`."""

from __future__ import annotations

import ast
from pathlib import Path

import redis.asyncio as aioredis

from adapters.base import PLAIN, ConversationKey, InboundAction, MessageRef, OutboundMessage
from adapters.platform import ChatAdapter, LiveMessage
from adapters.slack.adapter import SlackAdapter
from adapters.slack.stream import SlackLive
from adapters.telegram.adapter import TelegramAdapter
from adapters.telegram.stream import TelegramLive
from agent.protocols import ProgressEvent
from bot.conversation.running import context_for
from bot.runtime.streaming import AnswerStream, StreamPlan, live_message
from bot.wiring.console_view import ConsoleAdapter, ConsoleLive
from bot.wiring.runtime import owner_left
from tests.bot.recording import dm, message

ROOT = Path(__file__).resolve().parent.parent.parent
CAPABILITIES = (
    "addressing",
    "greeting",
    "live",
    "user_timezone",
    "user_left",
    "session_status",
    "progress_delay",
    "progress_refresh",
    "stream",
    # LiveMessage's
    "shows_steps",
    "plan",
    "task",
)


class Bare(ChatAdapter):
    """A platform that declares nothing beyond the required methods."""

    platform = "console"

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def send(self, conversation: ConversationKey, message: OutboundMessage) -> MessageRef:
        return MessageRef(conversation=conversation, message_id="1")

    async def edit(self, ref: MessageRef, message: OutboundMessage) -> None: ...

    async def notify(self, action: InboundAction, text: str, *, alert: bool = False) -> None: ...

    async def progress(self, conversation: ConversationKey, status: str | None) -> None: ...


def test_every_adapter_declares_itself_a_chat_adapter() -> None:
    for adapter in (SlackAdapter, TelegramAdapter, ConsoleAdapter):
        assert ChatAdapter in adapter.__mro__, adapter  # subclassed, so the defaults apply


async def test_a_platform_without_capabilities_gets_the_defaults() -> None:
    bare, chat = Bare(), dm("42")
    assert bare.addressing == PLAIN and bare.addressing.command("help") == "/help"
    assert bare.greeting == ""
    assert bare.progress_delay is None and bare.progress_refresh is None
    live = live_message(bare, chat, user_id="42", team_id=None, is_direct=True)
    assert live is None
    assert await bare.user_timezone("42") is None
    assert await bare.user_left("42") is False
    assert await bare.session_status(chat, None, "working") is None
    # and the service uses them as they are, without asking whether they exist
    assert (await context_for(bare, message(chat, "hi"))).timezone is None


async def test_a_declared_capability_is_what_the_service_uses() -> None:
    class Zoned(Bare):
        async def user_timezone(self, user_id: str) -> str | None:
            return "Europe/Lisbon"

        async def user_left(self, user_id: str) -> bool:
            return user_id == "gone"

    zoned, chat = Zoned(), dm("42")
    assert (await context_for(zoned, message(chat, "hi"))).timezone == "Europe/Lisbon"
    left = owner_left({"console": zoned})

    class Owner:
        platform, owner_id = "console", "gone"

    assert await left(Owner())  # type: ignore[arg-type]
    Owner.owner_id = "here"
    assert not await left(Owner())  # type: ignore[arg-type]


def test_no_capability_is_probed_with_getattr() -> None:
    probes = []
    for package in ("bot", "agent"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "hasattr")
                    and len(node.args) >= 2
                    and isinstance(node.args[1], ast.Constant)
                    and node.args[1].value in CAPABILITIES
                ):
                    probes.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.args[1].value}")
    assert not probes, f"declare these on ChatAdapter / StreamingModel instead: {probes}"


class Plain(LiveMessage):
    """A live message that declares nothing beyond the required methods."""

    message_id: str | None = None
    min_interval: float = 0.0

    def __init__(self) -> None:
        self.said: list[tuple[str, ...]] = []

    async def show(self, text: str) -> None:
        self.said.append(("show", text))

    async def reset(self, status: str | None) -> None: ...

    async def discard(self) -> None: ...

    async def finish(self, message: OutboundMessage) -> MessageRef:
        return MessageRef(conversation=dm("42"), message_id="1")


class Steps(Plain):
    @property
    def shows_steps(self) -> bool:
        return True

    async def plan(self, title: str, steps: list[tuple[str, str, str]]) -> None:
        self.said.append(("plan", title, *(status for _, _, status in steps)))

    async def task(self, task_id: str, title: str, status: str) -> None:
        self.said.append(("task", task_id, title, status))


def test_every_live_message_declares_itself_one() -> None:
    for live in (SlackLive, TelegramLive, ConsoleLive):
        assert LiveMessage in live.__mro__, live  # subclassed, so the defaults apply


async def test_a_live_message_without_steps_costs_its_tool_steps_nothing(
    redis: aioredis.Redis,
) -> None:
    """Tool steps and a plan go only to a live message that declares it shows them; for any
    other, a step neither calls it nor reads or records anything in Redis."""
    plan = StreamPlan(title="Tidy up", steps=(("clean", "Clean the desk"),))

    def stream(live: LiveMessage, key: str) -> AnswerStream:
        return AnswerStream(
            live=live,
            adapter=Bare(),
            conversation=dm("42"),
            redis=redis,
            redis_key=key,
            ttl_ms=60_000,
            interval=0.0,
            plan=plan,
        )

    started = ProgressEvent(kind="tool_started", step=1, tool="clean")
    finished = ProgressEvent(kind="tool_finished", step=1, tool="clean", detail={"status": "ok"})
    plain, steps = Plain(), Steps()
    quiet, shown = stream(plain, "caps:quiet"), stream(steps, "caps:shown")
    for event in (started, finished):
        await quiet.on_progress(event)
        await shown.on_progress(event)
    assert plain.said == [] and quiet.mode == "unknown"  # nothing read, nothing called
    assert await redis.exists("caps:quiet") == 0
    assert steps.said == [
        ("plan", "Tidy up", "in_progress"),
        ("task", "plan-1", "Clean the desk", "complete"),
    ]
    assert shown.mode == "live"
    assert Plain().shows_steps is False and await Plain().task("t", "x", "ok") is None
