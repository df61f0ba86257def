"""Chat commands speak each platform's own command syntax."""

from __future__ import annotations

import pytest

from adapters.base import ConversationKey
from agent.protocols import RunContext
from bot.conversation.commands import Commands
from bot.runtime.sessions import Session
from tests.bot.recording import message


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
async def test_help_and_unknown_commands_name_the_platforms_syntax(
    platform: str, help_line: str, unknown: str
) -> None:
    chat = ConversationKey(platform=platform, chat_id="C1")  # type: ignore[arg-type]
    context = RunContext(conversation_id=chat.id, platform=platform, user_id="U1", chat_id="C1")
    commands = Commands(None)
    session = Session(conversation_id=chat.id)
    shown = await commands.handle(message(chat, "/help", command="help"), context, session)
    assert help_line in shown.text and shown.private
    other = "/parley" if platform != "slack" else "• /memories"
    assert other not in shown.text
    refused = await commands.handle(message(chat, "/report", command="report"), context, session)
    assert refused.text == unknown
