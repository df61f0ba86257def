"""Posting to Telegram and editing what was posted, wherever it went.

A message goes to the conversation's chat, in parts when long (the buttons on the last). A
private message from a group goes to the person's own chat with Parley instead (a Telegram
user's private chat has their user id), never to the group. A prompt meant for a few people
in a group goes to each of them as an ephemeral message (Bot API 10.2: `sendMessage` with
`ephemeral_message_parameters`, edited with `editEphemeralMessageText`), which only its
receiver sees; where the server refuses that (an older Bot API, or a group where the bot may
not send them) the prompt is posted once, visibly. A server that does not know the parameter
ignores it and posts the message visibly: its answer then has no `ephemeral_message_id`, and
that message is the prompt.

Every message posted is named in the ref (`refs.py`), so an edit reaches each part
and each receiver.
"""

from __future__ import annotations

import logging
from typing import Any

from telegram import InlineKeyboardMarkup, Message
from telegram.constants import ParseMode
from telegram.ext import ExtBot

from adapters.base import ConversationKey, DeliveryError
from adapters.health import ApiHealth
from adapters.telegram.delivery import delivery
from adapters.telegram.format import MESSAGE_LIMIT
from adapters.telegram.refs import Placed
from adapters.telegram.stream import quoting

log = logging.getLogger(__name__)

MAX_RECEIVERS = 10  # ephemeral copies of one prompt; more people than that see it posted


def _thread(conversation: ConversationKey) -> int | None:
    return int(conversation.thread_id) if conversation.thread_id else None


async def post(
    bot: ExtBot[int],
    api: ApiHealth,
    chat_id: int,
    thread_id: int | None,
    parts: list[str],
    markup: InlineKeyboardMarkup | None,
    reply_to: str | None = None,
) -> list[int]:
    """Post HTML parts in order, the buttons on the last, the first replying to `reply_to`;
    the posted messages' ids."""
    posted: list[int] = []
    quoted = quoting(reply_to)
    with delivery(api):
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            sent = await bot.send_message(
                chat_id=chat_id,
                text=part,
                parse_mode=ParseMode.HTML,
                message_thread_id=thread_id,
                reply_markup=markup if last else None,
                disable_web_page_preview=True,
                reply_parameters=quoted if index == 0 else None,
            )
            posted.append(sent.message_id)
    return posted


async def post_ephemeral(
    bot: ExtBot[int],
    api: ApiHealth,
    conversation: ConversationKey,
    html: str,
    markup: InlineKeyboardMarkup | None,
    receivers: list[int],
) -> list[Placed] | None:
    """The prompt as one ephemeral message per receiver (the requester first). None when the
    requester's was refused: nothing was posted, and the caller posts it visibly. A plain
    message back means the server ignored the parameter and posted it for all: that one is
    the prompt, and nobody gets another."""
    placed: list[Placed] = []
    for receiver in receivers[:MAX_RECEIVERS]:
        try:
            with delivery(api):
                sent = await bot.send_message(
                    chat_id=int(conversation.chat_id),
                    text=html,
                    parse_mode=ParseMode.HTML,
                    message_thread_id=_thread(conversation),
                    reply_markup=markup,
                    disable_web_page_preview=True,
                    api_kwargs={"ephemeral_message_parameters": {"receiver_user_id": receiver}},
                )
        except DeliveryError as exc:
            if not placed:
                if not exc.permanent:
                    raise  # nothing went out yet: the outbox tries the whole send again
                log.info("no ephemeral prompt in %s (%s); posting it", conversation.id, exc)
                return None
            log.info("no ephemeral copy for %s in %s (%s)", receiver, conversation.id, exc)
            continue
        ephemeral = _ephemeral_id(sent)
        if ephemeral is None:
            log.info(
                "Telegram posted the prompt in %s visibly: no ephemeral messages", conversation.id
            )
            return [*placed, Placed(message_id=sent.message_id)]
        placed.append(Placed(message_id=ephemeral, receiver=receiver))
    return placed


def _ephemeral_id(sent: Message) -> int | None:
    value: Any = sent.api_kwargs.get("ephemeral_message_id")  # not parsed by PTB 22.8
    return value if isinstance(value, int) and not isinstance(value, bool) else None


async def edit_one(
    bot: ExtBot[int],
    api: ApiHealth,
    conversation: ConversationKey,
    placed: Placed,
    html: str,
    markup: InlineKeyboardMarkup | None,
) -> None:
    """Replace one posted message's text and buttons; an edit to the same text is no failure."""
    try:
        with delivery(api):
            if placed.receiver is not None:
                await bot.do_api_request(
                    "editEphemeralMessageText",
                    api_kwargs={
                        "chat_id": int(conversation.chat_id),
                        "receiver_user_id": placed.receiver,
                        "ephemeral_message_id": placed.message_id,
                        "text": html,
                        "parse_mode": ParseMode.HTML,
                        "reply_markup": markup,
                        "link_preview_options": {"is_disabled": True},
                    },
                )
            else:
                chat = placed.private_to or int(conversation.chat_id)
                await bot.edit_message_text(
                    chat_id=chat,
                    message_id=placed.message_id,
                    text=html,
                    parse_mode=ParseMode.HTML,
                    reply_markup=markup,
                    disable_web_page_preview=True,
                )
    except DeliveryError as exc:
        if "not modified" not in exc.reason.lower():
            raise


def fitted(parts: list[str], count: int) -> list[str]:
    """New text for `count` posted parts: one part each; more parts than messages end up
    together in the last message if they fit there, else the last part (which carries the
    end, such as what became of a decision) replaces it. Fewer leave the extra messages
    empty (""), for the caller to take back."""
    if len(parts) <= count:
        return [*parts[:-1], *[""] * (count - len(parts)), parts[-1]]
    rest = "\n".join(parts[count - 1 :])
    return [*parts[: count - 1], rest if len(rest) <= MESSAGE_LIMIT else parts[-1]]
