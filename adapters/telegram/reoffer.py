"""A prompt sent ephemerally that nobody answered is offered again where it will arrive.

Telegram does not promise to deliver an ephemeral message to a person who is offline, so a
question or an approval sent only that way could wait for ever. When such a prompt is sent,
its offer (`Offer`: the text, the buttons, who it is for) is kept as due work in `after`
seconds (`OfferStore`, bot/features/reoffers.py: in Redis, so a restart forgets nothing); an
edit of the prompt (answered, decided, expired) cancels it. When it comes due, whichever
process claims it calls `offer`: each receiver gets a copy in their private chat with Parley,
whose buttons decide in the group (`buttons.ELSEWHERE_PREFIX`); a receiver Parley may not
write to privately (they never started it) gets it posted visibly in the group instead, where
the conversation's rules let only them press it. Each receiver is offered a copy once (a
claim taken over after a crash skips who already had theirs); one Telegram did not take for a
reason that may pass is tried again on a later pass. The copies are kept with the store and
join the prompt's later edits.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel
from telegram import InlineKeyboardMarkup
from telegram.ext import ExtBot

from adapters.base import ConversationKey, DeliveryError, OutboundMessage, Undeliverable
from adapters.health import ApiHealth
from adapters.telegram.buttons import keyboard, origin
from adapters.telegram.posting import post
from adapters.telegram.refs import Placed

log = logging.getLogger(__name__)


class Offer(BaseModel):
    """An ephemeral prompt to offer again, as the store keeps it until it is due."""

    ref: str  # the prompt's message id (refs.py): what its edits name
    conversation: str  # ConversationKey.id of the group
    html: str
    receivers: list[int]  # the people the prompt is for (its audience); nobody else
    private_buttons: dict[str, Any] | None  # naming the group; None: no room in 64 bytes
    group_buttons: dict[str, Any] | None
    tries: int = 0  # passes that left someone for later (Telegram did not take a copy)


class OfferStore(Protocol):
    """Where offers wait (bot/features/reoffers.py)."""

    async def put(self, offer: Offer, at: float) -> None:
        """Keep `offer`, due at `at`."""
        ...

    async def settle(self, ref: str) -> list[Placed]:
        """The prompt `ref` was edited: no offer any more; the copies already made."""
        ...

    async def first(self, ref: str, person: int) -> bool:
        """True once per prompt and person: whether this one may offer them a copy."""
        ...

    async def made(self, ref: str, placed: list[Placed]) -> None:
        """Remember copies of the prompt `ref`, for its later edits."""
        ...

    async def forget(self, ref: str, person: int) -> None:
        """`person`'s copy did not go out, for a reason that may pass: they may have one later."""
        ...


@dataclass(kw_only=True)
class Reoffers:
    after: float  # seconds; 0: never
    bot: ExtBot[int]
    api: ApiHealth
    store: OfferStore | None = None  # None: no re-offers (nowhere durable to keep them)
    clock: Callable[[], float] = time.time

    async def watch(
        self,
        ref: str,
        conversation: ConversationKey,
        html: str,
        message: OutboundMessage,
        receivers: list[int],
    ) -> str:
        """Offer the prompt `ref` again unless it is settled within `after` seconds; `ref`."""
        if self.after <= 0 or self.store is None:
            return ref
        try:
            private: InlineKeyboardMarkup | None = keyboard(message, origin(conversation))
        except ValueError:  # the group's id leaves no room in Telegram's 64 bytes of data
            private = None
        group = keyboard(message)
        offer = Offer(
            ref=ref,
            conversation=conversation.id,
            html=html,
            receivers=receivers,
            private_buttons=private.to_dict() if private is not None else None,
            group_buttons=group.to_dict() if group is not None else None,
        )
        try:
            await self.store.put(offer, self.clock() + self.after)
        except Exception as exc:  # the prompt is out; only its second chance is lost
            log.warning("an ephemeral prompt will not be re-offered (%s)", type(exc).__name__)
        return ref

    async def settled(self, ref: str) -> list[Placed]:
        """The prompt was edited (answered, decided, expired): no re-offer; its copies, to edit."""
        if self.store is None:
            return []
        try:
            return await self.store.settle(ref)
        except Exception as exc:  # the prompt itself is edited all the same
            log.warning("a re-offered prompt's copies not found (%s)", type(exc).__name__)
            return []

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

    async def offer(self, offer: Offer) -> int:
        """Offer the due prompt again to each receiver not offered it yet; how many are left
        for a later pass (Telegram failed in a way that may pass). A store failure escapes (the
        claim comes due again); a send failure does not."""
        assert self.store is not None, "offers come from a store"
        conversation = ConversationKey.parse(offer.conversation)
        private = _markup(offer.private_buttons)
        made, later = 0, 0
        unreachable: list[int] = []
        for person in dict.fromkeys(offer.receivers):
            if not await self.store.first(offer.ref, person):
                continue  # offered already, by a claim before this one
            try:
                if offer.private_buttons is None and offer.group_buttons is not None:
                    raise Undeliverable("no room for the group in the buttons")
                ids = await post(self.bot, self.api, person, None, [offer.html], private)
            except Undeliverable as exc:
                log.info("prompt not re-offered privately to %s (%s)", person, exc.reason)
                unreachable.append(person)
                continue
            except DeliveryError as exc:
                log.warning("prompt not re-offered to %s yet (%s)", person, exc.reason)
                await self.store.forget(offer.ref, person)
                later += 1
                continue
            await self.store.made(offer.ref, [Placed(message_id=i, private_to=person) for i in ids])
            made += len(ids)
        if unreachable:
            try:
                chat, topic = int(conversation.chat_id), conversation.thread_id
                topic_id = int(topic) if topic else None
                markup = _markup(offer.group_buttons)
                ids = await post(self.bot, self.api, chat, topic_id, [offer.html], markup)
            except DeliveryError as exc:
                log.warning("prompt not re-offered in %s (%s)", conversation.id, exc.reason)
                if not exc.permanent:
                    for person in unreachable:
                        await self.store.forget(offer.ref, person)
                    later += len(unreachable)
            else:
                await self.store.made(offer.ref, [Placed(message_id=i) for i in ids])
                made += len(ids)
        log.info("an unanswered ephemeral prompt re-offered (%d copies, %d later)", made, later)
        return later


def _markup(data: dict[str, Any] | None) -> InlineKeyboardMarkup | None:
    return InlineKeyboardMarkup.de_json(data, None) if data else None
