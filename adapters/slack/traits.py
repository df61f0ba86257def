"""What neutral code knows of Slack (adapters/traits.py)."""

from __future__ import annotations

import re

from adapters.base import ConversationKey
from adapters.slack.config import MAX_TEXT
from adapters.traits import Traits

_USER = re.compile(r"^[UW][A-Z0-9]{6,}$")  # a person's id, never a chat's


def _address(key: ConversationKey) -> str:
    return "/".join(p for p in (key.team_id, key.chat_id, key.thread_id) if p)


def _parse(rest: str) -> ConversationKey | None:
    parts = rest.split("/")
    if len(parts) not in (2, 3) or not all(parts):
        return None
    thread = parts[2] if len(parts) == 3 else None
    return ConversationKey(platform="slack", team_id=parts[0], chat_id=parts[1], thread_id=thread)


# --- Event ids (the inbox takes each once; a retried delivery must come back with the same) ---


def event_id(delivery: object) -> str:
    """An Events API delivery: its `event_id`, or the event's ts where it has none."""
    return f"slack:{delivery}"


def action_event(action_ts: object, user: str) -> str:
    """A button press (one person's, at one moment)."""
    return f"slack:action:{action_ts}:{user}"


def command_event(trigger_id: object) -> str:
    """A slash command."""
    return f"slack:command:{trigger_id}"


TRAITS = Traits(
    name="slack",
    token_setting="SLACK_BOT_TOKEN",
    address_hint="slack:<team>/<channel>",
    max_text=MAX_TEXT,
    person="<@{user_id}>",
    address=_address,
    parse=_parse,
    is_direct=lambda key: key.chat_id.startswith("D"),
    person_like=lambda chat: bool(_USER.match(chat)),
)
