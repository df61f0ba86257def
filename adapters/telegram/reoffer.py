"""A prompt sent ephemerally that nobody answered is offered again where it will arrive.

Telegram does not promise to deliver an ephemeral message to a person who is offline, so a
question or an approval sent only that way could wait for ever. When such a prompt has not
been edited (answered, decided, expired) within `after` seconds, each receiver gets a copy in
their private chat with Parley, whose buttons decide in the group (`buttons.ELSEWHERE_PREFIX`);
a receiver Parley may not write to privately (they never started it) gets it posted visibly
in the group instead, where the conversation's rules let only them press it. The copies join
the prompt's later edits. Kept in the process that sent the prompt: a restart forgets a
pending re-offer, and the prompt then stays as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from telegram import InlineKeyboardMarkup
from telegram.ext import ExtBot

from adapters.base import ConversationKey, DeliveryError, OutboundMessage, Undeliverable
from adapters.health import ApiHealth
from adapters.telegram.buttons import keyboard, origin
from adapters.telegram.posting import post
from adapters.telegram.refs import Placed

log = logging.getLogger(__name__)

KEPT = 1_000  # prompts whose copies are remembered for their edits; oldest forgotten first


@dataclass(kw_only=True)
class Reoffers:
    after: float  # seconds; 0: never
    bot: ExtBot[int]
    api: ApiHealth
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep  # injectable: tests need no wait
    _waiting: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    copies: dict[str, list[Placed]] = field(default_factory=dict)  # prompt ref -> its copies

    def watch(
        self,
        ref: str,
        conversation: ConversationKey,
        html: str,
        message: OutboundMessage,
        receivers: list[int],
    ) -> str:
        """Offer the prompt `ref` again unless it is settled within `after` seconds; `ref`."""
        if self.after <= 0:
            return ref
        task = asyncio.create_task(self._later(ref, conversation, html, message, receivers))
        self._waiting[ref] = task
        task.add_done_callback(lambda _: self._waiting.pop(ref, None))
        return ref

    def settled(self, ref: str) -> list[Placed]:
        """The prompt was edited (answered, decided, expired): no re-offer; its copies, to edit."""
        task = self._waiting.pop(ref, None)
        if task is not None:
            task.cancel()
        return self.copies.get(ref, [])

    def buttons(
        self,
        placed: Placed,
        message: OutboundMessage,
        conversation: ConversationKey,
        markup: InlineKeyboardMarkup | None,
    ) -> InlineKeyboardMarkup | None:
        """A message's buttons as `placed` shows them: a private copy's name the group."""
        if placed.private_to is None:
            return markup
        try:
            return keyboard(message, origin(conversation))
        except ValueError:  # no room for the group: the copy keeps no buttons
            return None

    async def close(self) -> None:
        tasks = list(self._waiting.values())
        self._waiting.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _later(
        self,
        ref: str,
        conversation: ConversationKey,
        html: str,
        message: OutboundMessage,
        receivers: list[int],
    ) -> None:
        await self.sleep(self.after)
        placed: list[Placed] = []
        unreachable: list[int] = []
        for person in receivers:
            try:
                ids = await self._privately(person, conversation, html, message)
            except Undeliverable as exc:
                log.info("prompt not re-offered privately to %s (%s)", person, exc.reason)
                unreachable.append(person)
                continue
            except DeliveryError as exc:
                log.warning("prompt not re-offered to %s (%s)", person, exc.reason)
                continue
            placed += [Placed(message_id=i, private_to=person) for i in ids]
        if unreachable:
            try:
                chat, topic = int(conversation.chat_id), conversation.thread_id
                topic_id = int(topic) if topic else None
                ids = await post(self.bot, self.api, chat, topic_id, [html], keyboard(message))
                placed += [Placed(message_id=i) for i in ids]
            except DeliveryError as exc:
                log.warning("prompt not re-offered in %s (%s)", conversation.id, exc.reason)
        log.info("an unanswered ephemeral prompt re-offered (%d copies)", len(placed))
        self.copies[ref] = placed
        while len(self.copies) > KEPT:
            del self.copies[next(iter(self.copies))]

    async def _privately(
        self, person: int, conversation: ConversationKey, html: str, message: OutboundMessage
    ) -> list[int]:
        """The prompt in `person`'s private chat; its buttons decide in the group."""
        try:
            markup = keyboard(message, origin(conversation))
        except ValueError:  # the group's id leaves no room in Telegram's 64 bytes of data
            raise Undeliverable("no room for the group in the buttons") from None
        return await post(self.bot, self.api, person, None, [html], markup)
