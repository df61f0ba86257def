"""Parley's buttons on Telegram: an inline keyboard out, callback data back.

A button's callback data names the pending decision and the choice (`d:<decision>:<choice>`),
within Telegram's 64 bytes; up to three buttons share a row, more are stacked. A label is cut
to 64 bytes too: the label may be a server's or the model's text (an MCP enum value), and the
choice travels by index, so a cut label never changes what was chosen.
"""

from __future__ import annotations

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from adapters.base import OutboundMessage

CALLBACK_PREFIX = "d"
MAX_LABEL_BYTES = 64


def callback_data(decision_id: str, choice: str) -> str:
    data = f"{CALLBACK_PREFIX}:{decision_id}:{choice}"
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
    decision_id, _, choice = rest.rpartition(":")
    if prefix != CALLBACK_PREFIX or not decision_id or not choice:
        return None
    return decision_id, choice


def keyboard(message: OutboundMessage) -> InlineKeyboardMarkup | None:
    if not message.buttons or message.decision_id is None:
        return None
    row = [
        InlineKeyboardButton(label(button.label), url=button.url)
        if button.url
        else InlineKeyboardButton(
            label(button.label), callback_data=callback_data(message.decision_id, button.value)
        )
        for button in message.buttons
    ]
    rows = [row] if len(row) <= 3 else [[button] for button in row]
    return InlineKeyboardMarkup(rows)
