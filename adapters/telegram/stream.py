"""Telegram answers while they are written: drafts in private chats, a growing message in groups.

In a private chat the answer streams as a message draft (`sendMessageDraft`, an ephemeral
preview, with Telegram's stop button) and is then sent once as an ordinary message. In a group there are no drafts, so
one message is sent with the first text and edited as it grows; the caller throttles the
updates; python-telegram-bot's rate limiter waits out a 429 `retry_after`, and one still in
force pauses the updates until Telegram allows more. Whatever goes wrong while streaming,
`finish` still delivers the whole answer, through the adapter's own send and edit (and so
its errors).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Protocol

from telegram import InlineKeyboardMarkup, ReplyParameters
from telegram.constants import ParseMode
from telegram.error import BadRequest, RetryAfter, TelegramError
from telegram.ext import ExtBot

from adapters.base import ConversationKey, MessageRef, OutboundMessage, Undeliverable
from adapters.platform import LiveMessage
from adapters.telegram.buttons import keyboard
from adapters.telegram.refs import Placed, read, write

log = logging.getLogger(__name__)

# Telegram lets a bot post about 20 messages a minute into one group, edits included
GROUP_EDIT_INTERVAL = 3.0
_draft_ids = itertools.count(int(time.time()) % 1_000_000 * 1000 + 1)


def quoting(reply_to: str | None) -> ReplyParameters | None:
    """Reply parameters that quote message `reply_to`; sent even if it was deleted since."""
    if not reply_to or not reply_to.isdigit():
        return None
    return ReplyParameters(message_id=int(reply_to), allow_sending_without_reply=True)


def seconds(value: object) -> float:
    """A retry_after as seconds (python-telegram-bot gives an int or a timedelta)."""
    total = getattr(value, "total_seconds", None)
    return float(total()) if callable(total) else float(value)  # type: ignore[arg-type]


class Poster(Protocol):
    """What a stream needs from the adapter: its bot, its HTML, and its own sends and edits
    (so a whole answer fails the way any other message does)."""

    @property
    def bot(self) -> ExtBot[int]: ...

    def html(self, text: str, allowed: Iterable[str]) -> list[str]: ...

    async def send(self, conversation: ConversationKey, message: OutboundMessage) -> MessageRef: ...

    async def send_parts(
        self,
        conversation: ConversationKey,
        parts: list[str],
        markup: InlineKeyboardMarkup | None,
        reply_to: str | None = None,
    ) -> MessageRef: ...

    async def edit_html(
        self, ref: MessageRef, html: str, markup: InlineKeyboardMarkup | None
    ) -> None: ...


@dataclass(kw_only=True)
class TelegramLive(LiveMessage):
    poster: Poster
    conversation: ConversationKey
    draft: bool  # a private chat: stream as drafts
    allowed_mentions: frozenset[str] = frozenset()  # as on the reply: what may ping
    reply_to: str | None = None  # in a group: the message that asked, which the answer quotes
    draft_id: int = field(default_factory=lambda: next(_draft_ids))
    _message_id: int | None = None
    _not_before: float = 0.0
    _broken: bool = False

    @property
    def message_id(self) -> str | None:
        return None if self._message_id is None else str(self._message_id)

    @property
    def min_interval(self) -> float:
        """Least seconds between two updates that this place allows."""
        return 0.0 if self.draft else GROUP_EDIT_INTERVAL

    @property
    def _thread(self) -> int | None:
        thread = self.conversation.thread_id
        return int(thread) if thread else None

    async def show(self, text: str) -> None:
        if self._broken or time.monotonic() < self._not_before:
            return  # Telegram asked us to wait; the next update carries the text so far
        html = self.poster.html(text, self.allowed_mentions)[0]
        bot, chat = self.poster.bot, int(self.conversation.chat_id)
        try:
            if self.draft:
                await bot.send_message_draft(
                    chat_id=chat,
                    draft_id=self.draft_id,
                    text=html,
                    parse_mode=ParseMode.HTML,
                    message_thread_id=self._thread,
                    # Bot API 10.3, not wrapped by python-telegram-bot 22.8: a stop button,
                    # which sends a stopped_message_generation update (cancels like /cancel)
                    api_kwargs={"can_stop": True},
                )
            elif self._message_id is None:
                sent = await bot.send_message(
                    chat_id=chat,
                    text=html,
                    parse_mode=ParseMode.HTML,
                    message_thread_id=self._thread,
                    disable_web_page_preview=True,
                    # the growing message becomes the answer: it quotes the question now
                    reply_parameters=quoting(self.reply_to),
                )
                self._message_id = sent.message_id
            else:
                await bot.edit_message_text(
                    chat_id=chat,
                    message_id=self._message_id,
                    text=html,
                    parse_mode=ParseMode.HTML,
                    disable_web_page_preview=True,
                )
        except RetryAfter as exc:
            wait = seconds(exc.retry_after)
            self._not_before = time.monotonic() + wait
            log.info("Telegram asked for %.1f s between streamed updates", wait)
        except BadRequest as exc:
            if "not modified" not in str(exc).lower():
                self._broken = True
                log.warning("Telegram refused a streamed update (%s); sending whole", exc)
        except TelegramError as exc:
            self._broken = True
            log.warning("streaming to Telegram failed (%s); sending whole", type(exc).__name__)

    async def reset(self, status: str | None) -> None:
        self._not_before = 0.0
        await self.show(f"_{status}_" if status else "…")

    async def discard(self) -> None:
        if self._message_id is None:
            return  # a draft vanishes by itself
        try:
            await self.poster.bot.delete_message(
                chat_id=int(self.conversation.chat_id), message_id=self._message_id
            )
        except TelegramError as exc:
            log.warning("could not take back a streamed message (%s)", type(exc).__name__)
        self._message_id = None

    async def finish(self, message: OutboundMessage) -> MessageRef:
        if message.private_to is not None and message.private_to != self.conversation.chat_id:
            await self.discard()  # an answer for one person never lands in the group
        if self._message_id is None:
            # a draft is only a preview: the answer itself is sent once, now
            return await self.poster.send(self.conversation, message)
        parts = self.poster.html(message.text, message.allowed_mentions)
        markup = keyboard(message)
        ref = MessageRef(conversation=self.conversation, message_id=str(self._message_id))
        try:
            await self.poster.edit_html(ref, parts[0], markup if len(parts) == 1 else None)
        except Undeliverable as exc:
            log.warning("could not finish the streamed message (%s); sending it whole", exc.reason)
            await self.discard()
            return await self.poster.send(self.conversation, message)
        if len(parts) == 1:
            return ref
        rest = await self.poster.send_parts(self.conversation, parts[1:], markup)
        placed = [Placed(message_id=self._message_id), *read(rest.message_id)]
        return replace(rest, message_id=write(placed))
