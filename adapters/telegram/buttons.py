"""Parley's buttons on Telegram: an inline keyboard out, callback data back.

A button's callback data names the pending decision and the choice (`d:<decision>:<choice>`),
within Telegram's 64 bytes; up to three buttons share a row, more are stacked. A label is cut
to 64 bytes too: the label may be a server's or the model's text (an MCP enum value), and the
choice travels by index, so a cut label never changes what was chosen.
"""

from __future__ import annotations

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from adapters.base import ConversationKey, OutboundMessage

CALLBACK_PREFIX = "d"
ELSEWHERE_PREFIX = "o"  # a prompt's copy in a person's private chat: `o:<chat>[/<topic>]:…`
MAX_LABEL_BYTES = 64


def callback_data(decision_id: str, choice: str, origin: str | None = None) -> str:
    """`origin`: the group chat (`chat` or `chat/topic`) a prompt copied into a person's
    private chat is about, so a press there decides in that group's conversation."""
    data = f"{CALLBACK_PREFIX}:{decision_id}:{choice}"
    if origin is not None:
        data = f"{ELSEWHERE_PREFIX}:{origin}:{decision_id}:{choice}"
    if len(data.encode()) > 64:
        raise ValueError(f"callback data over Telegram's 64 bytes: {data!r}")
    return data


def label(text: str) -> str:
    """`text` within MAX_LABEL_BYTES of UTF-8, cut on a character with an ellipsis."""
    if len(text.encode()) <= MAX_LABEL_BYTES:
        return text
    room = MAX_LABEL_BYTES - len("…".encode())
    return text.encode()[:room].decode(errors="ignore").rstrip() + "…"


def parse_callback_data(data: str) -> tuple[str, str] | None:
    prefix, _, rest = data.partition(":")
    if prefix == ELSEWHERE_PREFIX:
        _, _, rest = rest.partition(":")
    elif prefix != CALLBACK_PREFIX:
        return None
    decision_id, _, choice = rest.rpartition(":")
    if not decision_id or not choice:
        return None
    return decision_id, choice


def origin(conversation: ConversationKey) -> str:
    """A group conversation as a private copy's buttons name it (`ELSEWHERE_PREFIX`)."""
    topic = f"/{conversation.thread_id}" if conversation.thread_id else ""
    return f"{conversation.chat_id}{topic}"


def origin_of(data: str) -> tuple[str, str | None] | None:
    """The group chat (and topic) a press from a private copy of a prompt is about."""
    prefix, _, rest = data.partition(":")
    if prefix != ELSEWHERE_PREFIX:
        return None
    origin = rest.partition(":")[0]
    chat, _, topic = origin.partition("/")
    if not chat.lstrip("-").isdigit() or (topic and not topic.isdigit()):
        return None
    return chat, topic or None


def keyboard(message: OutboundMessage, origin: str | None = None) -> InlineKeyboardMarkup | None:
    if not message.buttons or message.decision_id is None:
        return None
    row = [
        InlineKeyboardButton(label(button.label), url=button.url)
        if button.url
        else InlineKeyboardButton(
            label(button.label),
            callback_data=callback_data(message.decision_id, button.value, origin),
        )
        for button in message.buttons
    ]
    rows = [row] if len(row) <= 3 else [[button] for button in row]
    return InlineKeyboardMarkup(rows)
