"""What neutral code knows of Telegram (adapters/traits.py)."""

from __future__ import annotations

from adapters.base import ConversationKey
from adapters.telegram.inbound import MAX_TEXT
from adapters.traits import Traits


def _parse(rest: str) -> ConversationKey | None:
    if not rest.lstrip("-").isdigit():
        return None
    return ConversationKey(platform="telegram", chat_id=rest)


TRAITS = Traits(
    name="telegram",
    token_setting="TELEGRAM_BOT_TOKEN",
    address_hint="telegram:<chat id>",
    max_text=MAX_TEXT,
    parse=_parse,
    is_direct=lambda key: not key.chat_id.startswith("-"),  # groups have negative ids
)
