"""Chat commands speak each platform's own command syntax."""

from __future__ import annotations

import pytest

from adapters.base import Addressing, ConversationKey
from adapters.slack import ADDRESSING as SLACK
from adapters.telegram import TelegramAdapter, TelegramConfig
from agent.protocols import MemoryPage, MemoryRecord, RunContext
from bot.conversation.commands import Commands
from bot.conversation.effects import Received, Send
from bot.conversation.engine import Policy, decide
from bot.runtime.sessions import Session
from tests.bot.recording import message

# What each adapter declares (Telegram before getMe knows its name; the console says nothing).
ADDRESSING = {
    "slack": SLACK,
    "telegram": TelegramAdapter(config=TelegramConfig(open_access=True, token="1:x")).addressing,
    "console": Addressing(),
}


@pytest.mark.parametrize(
    ("platform", "help_line", "unknown"),
    [
        (
            "slack",
            "• /parley memories",
            "I don't know the command /parley report. Try /parley help.",
        ),
        ("telegram", "• /memories", "I don't know the command /report. Try /help."),
        ("console", "• /memories", "I don't know the command /report. Try /help."),
    ],
)
def test_help_and_unknown_commands_name_the_platforms_syntax(
    platform: str, help_line: str, unknown: str
) -> None:
    chat = ConversationKey(platform=platform, chat_id="C1")  # type: ignore[arg-type]
    policy = Policy(now=0.0, addressing=ADDRESSING[platform])

    def said(command: str) -> Send:
        event = message(chat, f"/{command}", command=command)
        [effect] = decide(Session(), None, Received(entry_id="1-0", event=event), policy)
        assert isinstance(effect, Send)
        return effect

    shown = said("help").message
    assert help_line in shown.text and shown.private_to == "42"
    # /connections is listed in the platform's own syntax (Slack: /parley connections)
    assert help_line.replace("memories", "connections") in shown.text
    other = "/parley" if platform != "slack" else "• /memories"
    assert other not in shown.text
    assert said("report").message.text == unknown


class TwoMemories:
    """A memory store holding two of Ana's memories (only what /memories and /forget read)."""

    async def list_memories(
        self, context: RunContext, *, offset: int = 0, limit: int = 20
    ) -> MemoryPage:
        records = [
            MemoryRecord(
                id=f"m{n}", text=f"fact {n}", kind="fact", scope="user:slack:U1", author="U1",
                source_conversation="c", created_at=0.0, last_used_at=0.0,
            )
            for n in (1, 2)
        ]  # fmt: skip
        return MemoryPage(records=records[offset : offset + limit], total=2)

    async def forget(self, context: RunContext, memory_id: str | None = None) -> int:
        return 0


@pytest.mark.parametrize(
    ("platform", "forget_hint", "which"),
    [
        ("slack", "say `/parley forget N` to drop one, or `/parley forget all`.",
         "Tell me which one: `/parley forget N` (see `/parley memories`), or `/parley forget all`."),
        ("telegram", "say /forget N to drop one, or /forget all.",
         "Tell me which one: /forget N (see /memories), or /forget all."),
    ],
)  # fmt: skip
async def test_memory_lists_and_forget_name_the_platforms_syntax(
    platform: str, forget_hint: str, which: str
) -> None:
    commands = Commands(TwoMemories())  # type: ignore[arg-type]
    chat = ConversationKey(platform=platform, chat_id="C1")  # type: ignore[arg-type]
    context = RunContext(conversation_id=chat.id, platform=platform, user_id="U1", chat_id="C1")
    listing = message(chat, "/memories", command="memories")
    shown = await commands.reply(listing, context, Session(), ADDRESSING[platform])
    assert shown.text.endswith(forget_hint) and "1. fact 1" in shown.text
    vague = message(chat, "/forget it", command="forget", args="it")
    assert (await commands.reply(vague, context, Session(), ADDRESSING[platform])).text == which
