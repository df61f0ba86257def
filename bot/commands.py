"""The chat commands: /help, /start, /memories, /forget, /cancel, /status."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from adapters.base import InboundMessage
from agent.protocols import MemoryStore, RunContext
from bot.sessions import Session

HELP = """I'm Parley. Tell me what you need and I'll work on it: I can use tools, I remember \
what you tell me (ask me to remember something), and I always ask before I do anything \
with side effects, like setting a reminder.{where}

Commands:
• {p}memories — what I remember about you
• {p}forget N — forget memory number N; {p}forget all — forget everything about you
• {p}cancel — stop what I'm doing or drop the pending question
• {p}status — what I'm doing and your usage today
• {p}help — this message"""

# How each platform writes a command, and where to talk to Parley there.
COMMAND_PREFIX = {"slack": "/parley ", "telegram": "/", "console": "/"}
WHERE = {
    "slack": "\n\nMention me in a channel (I answer in a thread) or message me directly.",
    "telegram": "\n\nIn a group, mention me or reply to one of my messages.",
}


def command_text(platform: str, name: str) -> str:
    """How a person types command `name` on `platform`: /parley help, /help."""
    return f"{COMMAND_PREFIX.get(platform, '/')}{name}"


def help_text(platform: str) -> str:
    return HELP.format(p=COMMAND_PREFIX.get(platform, "/"), where=WHERE.get(platform, ""))


STATUS_TEXT = {
    "idle": "I'm not working on anything for you right now.",
    "running": "I'm working on your last request.",
    "awaiting_answer": "I'm waiting for your answer to my question.",
    "awaiting_approval": "I'm waiting for your approval of my plan.",
}


@dataclass(frozen=True, kw_only=True)
class CommandResult:
    text: str
    cancel: bool = False  # end the run or pending decision
    private: bool = False  # show only to the person who asked, where the platform can


UsageText = Callable[[InboundMessage], Awaitable[str]]


class Commands:
    def __init__(self, memory: MemoryStore | None, usage: UsageText | None = None) -> None:
        self.memory = memory
        self.usage = usage

    async def handle(
        self, event: InboundMessage, context: RunContext, session: Session
    ) -> CommandResult:
        command = (event.command or "").lower()
        platform = event.conversation.platform
        if command in ("help", "start"):
            return CommandResult(text=help_text(platform), private=True)
        if command == "memories":
            return CommandResult(text=await self._memories(context), private=True)
        if command == "forget":
            return CommandResult(text=await self._forget(context, event.args), private=True)
        if command == "cancel":
            if session.status == "idle":
                return CommandResult(text="There's nothing to cancel.")
            return CommandResult(text="Cancelled. What would you like to do next?", cancel=True)
        if command == "status":
            lines = [STATUS_TEXT[session.status]]
            if self.usage is not None:
                lines.append(await self.usage(event))
            return CommandResult(text="\n".join(lines), private=True)
        return CommandResult(
            text=f"I don't know the command {command_text(platform, command)}. "
            f"Try {command_text(platform, 'help')}."
        )

    async def _memories(self, context: RunContext) -> str:
        if self.memory is None:
            return "My memory isn't available right now."
        memories = await self.memory.list_memories(context)
        if not memories:
            return "I don't remember anything about you yet."
        lines = [f"{index}. {memory.text}" for index, memory in enumerate(memories, 1)]
        return (
            "Here's what I remember about you:\n"
            + "\n".join(lines)
            + ("\n\nSay /forget N to forget one, or /forget all.")
        )

    async def _forget(self, context: RunContext, args: str) -> str:
        if self.memory is None:
            return "My memory isn't available right now."
        target = args.strip().lower()
        if target == "all":
            count = await self.memory.forget(context)
            return f"Done — I forgot {count} thing{'s' if count != 1 else ''} about you."
        if not target.isdigit():
            return "Tell me which one: /forget N (see /memories), or /forget all."
        memories = await self.memory.list_memories(context)
        index = int(target)
        if not 1 <= index <= len(memories):
            return f"I don't have a memory number {index}; see /memories."
        await self.memory.forget(context, memories[index - 1].id)
        return f"Forgotten: “{memories[index - 1].text}”"
