"""Chat commands speak each platform's own command syntax."""

from __future__ import annotations

import pytest

from adapters.base import ConversationKey
from bot.conversation.effects import Received, Send
from bot.conversation.engine import Policy, decide
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
def test_help_and_unknown_commands_name_the_platforms_syntax(
    platform: str, help_line: str, unknown: str
) -> None:
    chat = ConversationKey(platform=platform, chat_id="C1")  # type: ignore[arg-type]
    policy = Policy(now=0.0)

    def said(command: str) -> Send:
        event = message(chat, f"/{command}", command=command)
        [effect] = decide(Session(), None, Received(entry_id="1-0", event=event), policy)
        assert isinstance(effect, Send)
        return effect

    shown = said("help").message
    assert help_line in shown.text and shown.private_to == "42"
    other = "/parley" if platform != "slack" else "• /memories"
    assert other not in shown.text
    assert said("report").message.text == unknown
