"""Where a memory came from, as a person reads it: "you told me in #launch on 3 Nov".

Who: the viewer themself ("you"), or the name the platform gave the author when it was
learned (a Slack mention would ping them, so never one). Where: a direct message, a Slack
channel (`<#C…>`, which Slack shows as its name), this chat, or another group. When: the day,
in the viewer's time zone when the platform says it, with the year when it is not this one.

What the audience may learn: a memory learned in this very chat says who and where (everyone
here saw it said). One learned elsewhere (a team memory from another channel or a direct
message) names neither its author nor the place, unless the viewer is its author and the
answer goes to them alone: a shared thread must not learn that a private channel exists,
or who said what there. The same words serve /why, /memories and the model's
`memory_sources` tool, whose answer anyone in the thread may read.

A memory's `source_conversation` is a conversation id, `platform:team:chat:thread`
(adapters.base.ConversationKey.id, '-' for none).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agent.protocols import MemoryRecord, RunContext


@dataclass(frozen=True, kw_only=True)
class Source:
    platform: str
    team_id: str
    chat_id: str


def source(memory: MemoryRecord) -> Source | None:
    parts = memory.source_conversation.split(":", 3)
    if len(parts) != 4 or not parts[2]:
        return None
    return Source(platform=parts[0], team_id=parts[1], chat_id=parts[2])


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


def learned_here(memory: MemoryRecord, viewer: RunContext) -> bool:
    """Said in the chat the viewer is in (any thread of it): its audience saw it said."""
    found = source(memory)
    return (
        found is not None
        and found.platform == viewer.platform
        and found.chat_id == viewer.chat_id
        and found.team_id == (viewer.team_id or "-")
    )


def _place(found: Source, memory: MemoryRecord, viewer: RunContext) -> str:
    if found.platform == "console":
        return "in the console"
    if found.platform == "slack":
        if found.chat_id.startswith("D"):
            return "in a direct message"
        return f"in <#{found.chat_id}>"
    if found.chat_id == memory.author:  # a Telegram private chat has its person's id
        return "in a direct message"
    return "in this chat" if found.chat_id == viewer.chat_id else "in a group chat"


def where(memory: MemoryRecord, viewer: RunContext) -> str:
    found = source(memory)
    if found is None:
        return ""
    mine_alone = memory.author == viewer.user_id and viewer.is_direct
    if learned_here(memory, viewer) or mine_alone:
        return _place(found, memory, viewer)
    return "in another conversation"


def who(memory: MemoryRecord, viewer: RunContext) -> str:
    mine = memory.author == viewer.user_id
    name = (memory.author_name or "someone") if learned_here(memory, viewer) else "someone"
    if memory.origin == "extracted":
        return "I noted it from what you said" if mine else f"I noted it from what {name} said"
    return "you told me" if mine else f"{name} told me"


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
