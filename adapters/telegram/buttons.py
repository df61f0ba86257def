"""Parley's buttons on Telegram: an inline keyboard out, callback data back.

A button's callback data names the pending decision and the choice (`d:<decision>:<choice>`),
within Telegram's 64 bytes; up to three buttons share a row, more are stacked.
"""

from __future__ import annotations

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from adapters.base import OutboundMessage

CALLBACK_PREFIX = "d"


def callback_data(decision_id: str, choice: str) -> str:
    data = f"{CALLBACK_PREFIX}:{decision_id}:{choice}"
    if len(data.encode()) > 64:
        raise ValueError(f"callback data over Telegram's 64 bytes: {data!r}")
    return data


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
        InlineKeyboardButton(button.label, url=button.url)
        if button.url
        else InlineKeyboardButton(
            button.label, callback_data=callback_data(message.decision_id, button.value)
        )
        for button in message.buttons
    ]
    rows = [row] if len(row) <= 3 else [[button] for button in row]
    return InlineKeyboardMarkup(rows)
