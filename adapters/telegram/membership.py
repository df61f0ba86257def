"""Whether a person is still in a Telegram chat, for a schedule's slot (`member_of`).

From `getChatMember`: a person who left or was removed, or a chat Parley was removed from
(403, "chat not found"), is no longer there; a private chat is its one person's; a network
failure is "cannot tell" (None).
"""

from __future__ import annotations

import logging
from typing import Protocol

from telegram import Bot
from telegram.error import BadRequest, Forbidden, TelegramError

from adapters.base import ConversationKey

log = logging.getLogger(__name__)

PRESENT = ("creator", "administrator", "member")


class WithBot(Protocol):
    """The Telegram adapter, as far as this needs it."""

    @property
    def bot(self) -> Bot: ...


async def member_of(adapter: WithBot, conversation: ConversationKey, user_id: str) -> bool | None:
    """The Telegram adapter's `member_of` (ChatAdapter)."""
    chat = int(conversation.chat_id)
    if not user_id.isdigit():
        return False
    if chat > 0:
        return str(chat) == user_id
    try:
        member = await adapter.bot.get_chat_member(chat_id=chat, user_id=int(user_id))
    except (BadRequest, Forbidden):
        return False
    except TelegramError as exc:
        log.info("could not ask Telegram about a member (%s)", type(exc).__name__)
        return None
    if member.status == "restricted":  # a member with limits, or someone who left meanwhile
        return bool(getattr(member, "is_member", False))
    return member.status in PRESENT
