"""What an adapter can do is declared on `ChatAdapter` with a default, never probed.

A platform that lacks a capability inherits the default, and the service calls it without
asking first: no stream, no time zone, nobody left, no session status, plain `/help`."""

from __future__ import annotations

import ast
from pathlib import Path

from adapters.base import PLAIN, ConversationKey, InboundAction, MessageRef, OutboundMessage
from adapters.platform import ChatAdapter
from adapters.slack.adapter import SlackAdapter
from adapters.telegram.adapter import TelegramAdapter
from bot.conversation.running import context_for
from bot.runtime.streaming import live_message
from bot.wiring.console_view import ConsoleAdapter
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
