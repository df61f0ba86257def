"""Where a memory came from, as a person reads it: "you told me in #launch on 3 Nov".

Who: the viewer themself ("you"), or the name the platform gave the author when it was
learned (a Slack mention would ping them, so never one). Where: a direct message, a Slack
channel (`<#C…>`, which Slack shows as its name), this chat, or another group. When: the day,
in the viewer's time zone when the platform says it, with the year when it is not this one.
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from adapters.base import ConversationKey
from agent.protocols import MemoryRecord, RunContext


def _zone(context: RunContext) -> tzinfo:
    try:
        return ZoneInfo(context.timezone) if context.timezone else UTC
    except (ZoneInfoNotFoundError, ValueError):
        return UTC


def day(at: float, context: RunContext, now: float) -> str:
    zone = _zone(context)
    when, today = datetime.fromtimestamp(at, zone), datetime.fromtimestamp(now, zone)
    shown = f"{when.day} {when:%b}"
    return shown if when.year == today.year else f"{shown} {when.year}"


def where(memory: MemoryRecord, viewer: RunContext) -> str:
    try:
        key = ConversationKey.parse(memory.source_conversation)
    except (ValueError, AssertionError):
        return ""
    if key.platform == "console":
        return "in the console"
    if key.platform == "slack":
        if key.chat_id.startswith("D"):
            return "in a direct message"
        return f"in <#{key.chat_id}>"
    if key.chat_id == memory.author:  # a Telegram private chat has its person's id
        return "in a direct message"
    return "in this chat" if key.chat_id == viewer.chat_id else "in a group chat"


def who(memory: MemoryRecord, viewer: RunContext) -> str:
    mine = memory.author == viewer.user_id
    if memory.origin == "extracted":
        return (
            "I noted it from what you said"
            if mine
            else (f"I noted it from what {memory.author_name or 'someone'} said")
        )
    return "you told me" if mine else f"{memory.author_name or 'someone'} told me"


def learned(memory: MemoryRecord, viewer: RunContext, now: float) -> str:
    """One phrase: who, where and when; and when it was last corrected."""
    parts = [who(memory, viewer)]
    if place := where(memory, viewer):
        parts.append(place)
    if memory.created_at:
        parts.append(f"on {day(memory.created_at, viewer, now)}")
    text = " ".join(parts)
    if memory.corrected_at:
        text += f", corrected on {day(memory.corrected_at, viewer, now)}"
    return text
