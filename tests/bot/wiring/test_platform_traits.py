"""What neutral code knows of each platform comes from the platform's adapter
(adapters/<platform>/traits.py), found by the platform's name."""

from __future__ import annotations

import pytest

from adapters import traits
from adapters.base import ConversationKey
from agent.mcp import McpConfig, ServerConfig
from bot.config import Settings
from bot.features.triggers import conversation_of
from bot.wiring.mcp_setup import warn_person_chats
from bot.wiring.runtime import message_limits


def test_every_chat_platform_declares_its_traits() -> None:
    assert [t.name for t in traits.known()] == ["slack", "telegram"]
    assert traits.of("console") is traits.NEUTRAL
    assert traits.of("no such platform") is traits.NEUTRAL
    assert traits.of("../etc") is traits.NEUTRAL


def test_a_mention_pings_where_the_platform_has_one_else_names_the_person() -> None:
    assert traits.mention("slack", "U1", "Ada") == "<@U1>"
    assert traits.mention("telegram", "42", "Ada") == "Ada"
    assert traits.mention("telegram", "42", "") == "42"
    assert traits.mention("console", "me", "Ada") == "Ada"


@pytest.mark.parametrize(
    ("written", "key", "direct"),
    [
        ("telegram:42", ConversationKey(platform="telegram", chat_id="42"), True),
        ("telegram:-100", ConversationKey(platform="telegram", chat_id="-100"), False),
        ("slack:T1/C1", ConversationKey(platform="slack", team_id="T1", chat_id="C1"), False),
        (
            "slack:T1/D1/1.5",
            ConversationKey(platform="slack", team_id="T1", chat_id="D1", thread_id="1.5"),
            True,
        ),
    ],
)
def test_a_written_conversation_reads_back_the_same(
    written: str, key: ConversationKey, direct: bool
) -> None:
    assert conversation_of(written) == key
    assert traits.of(key.platform).written(key) == written
    assert traits.of(key.platform).is_direct(key) is direct


@pytest.mark.parametrize("written", ["telegram:abc", "slack:C1", "slack:T1//x", "console:me", "x"])
def test_a_conversation_no_platform_writes_so_is_refused_with_every_form(written: str) -> None:
    with pytest.raises(ValueError, match="slack:<team>/<channel> nor telegram:<chat id>"):
        conversation_of(written)


def test_a_slack_user_id_written_as_a_chat_is_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = McpConfig(
        mcpServers={"s": ServerConfig(command="x", allow=["slack:U1234567", "telegram:42"])}
    )
    warn_person_chats(config)
    assert "names a Slack user as a chat" in caplog.text
    assert "write slack:user:U1234567" in caplog.text
    assert "telegram:42" not in caplog.text


def test_each_platform_s_longest_message_comes_from_its_adapter() -> None:
    settings = Settings.load(
        env_file=None,
        telegram={"TELEGRAM_BOT_TOKEN": "1:x"},
        slack={"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"},
    )
    assert message_limits(settings) == {"telegram": 4096, "slack": 40_000}
    chosen = Settings.load(
        env_file=None,
        telegram={"TELEGRAM_BOT_TOKEN": "1:x"},
        agent={"PARLEY_MAX_MESSAGE_CHARS": 1000},
    )
    assert message_limits(chosen) == {"telegram": 1000}
