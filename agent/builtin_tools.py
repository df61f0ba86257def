"""The tools every Parley agent has: the two human tools (from `deferred`), memory, reminders,
schedules, time, arithmetic."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field

from agent.calculator import CalculatorError, evaluate
from agent.deferred import ask_user, propose_plan
from agent.protocols import MemoryFull, MemoryKind, RunContext, Share
from agent.provenance import learned
from agent.schedule_tools import DEFAULT_MIN_INTERVAL, schedule_tools
from agent.tools import ApprovalRequired, Tool, ToolContext, ToolError, ToolRegistry, tool

MAX_REMINDER_DELAY = 366 * 24 * 3600
MEMORY_PAGE = 20
# The agent knows no platform's command syntax, so the user is pointed at asking, not a command.
FULL_TEXT = (
    "I can keep {limit} memories here; ask me to list them and forget some, and I'll remember this."
)


def _remembers_for_others(args: dict[str, Any], run: RunContext) -> bool:
    # A memory others will be told (the chat's, the team's) is the author's decision, said
    # with Approve: in a shared chat anyone's text may be what asked for it. A run nobody
    # asked for (a trigger in its owner's name) reads anyone's text, so even the owner's
    # private memory waits for their yes.
    return not run.asked or run.is_shared_scope(run.write_scope(args.get("share")))


def _describe_remember(args: dict[str, Any]) -> str:
    if args.get("kind") == "instruction":
        return f"Follow in every run in this chat from now on: “{args.get('text', '')}”"
    where = {"team": "the whole team", "chat": "this chat", "private": "only you"}.get(
        str(args.get("share")), ""
    )
    return f"Remember for {where or 'this chat'}: “{args.get('text', '')}”"


@tool(category="memory", side_effects=_remembers_for_others, describe=_describe_remember)
async def remember(
    ctx: ToolContext,
    text: str,
    share: Share | None = None,
    kind: MemoryKind = "fact",
) -> str:
    """Remember a durable fact or preference for later conversations.

    Args:
        text: The thing to remember, as a self-contained sentence.
        share: Who will be told it later. Leave it out for this conversation (the user in a
            direct chat, everyone here in a shared one); "private" (only this user, in
            their own direct chats), "chat" (everyone in this chat) or "team" (everyone in
            the team). A chat or team memory waits for the user's approval.
        kind: "fact", "preference" or "episode"; or "instruction" for a standing
            instruction every later run in this conversation follows ("remember for this
            channel: answer in Spanish"), kept for this conversation whatever `share` says.
    """
    if ctx.memory is None:
        raise ToolError("Memory is unavailable right now; tell the user you cannot remember it.")
    if kind == "instruction":  # the conversation's own: a channel's, or the person's in a DM
        share = None
    try:
        record = await ctx.memory.remember(text, ctx.run, kind=kind, share=share)
    except MemoryFull as full:
        raise ToolError(
            "Not remembered: this memory scope is full. Tell the user exactly: "
            + FULL_TEXT.format(limit=full.limit)
        ) from None
    where = record.scope_label
    if record.scope == ctx.run.user_scope and not ctx.run.is_direct:
        where += ": only this user, in their direct chats with you"
    return f"Remembered (memory id {record.id}, scope {where})."


@tool(category="memory")
async def list_memories(ctx: ToolContext, page: int = 1) -> str:
    """List what you remember that this conversation may see, newest first, with ids and
    scope (private, channel or team). Use it when the user asks what you know or remember.

    Args:
        page: Page of 20 memories, from 1.
    """
    if ctx.memory is None:
        raise ToolError("Memory is unavailable right now.")
    page = max(1, page)
    found = await ctx.memory.list_memories(
        ctx.run, offset=(page - 1) * MEMORY_PAGE, limit=MEMORY_PAGE
    )
    if not found.records:
        return "Nothing remembered here yet." if page == 1 else f"No page {page}."
    first = found.offset + 1
    lines = [f"Memories {first}-{found.offset + len(found.records)} of {found.total}:"]
    for record in found.records:
        day = datetime.fromtimestamp(record.created_at, UTC).strftime("%Y-%m-%d")
        lines.append(f"- [{record.id}] ({record.scope_label}, {record.kind}, {day}) {record.text}")
    if found.has_more:
        lines.append(f"More: list_memories(page={page + 1}).")
    return "\n".join(lines)


@tool(category="memory")
async def memory_sources(ctx: ToolContext) -> str:
    """Where the remembered things you were given in this conversation lately came from:
    each one's text, who told you, where and when. Use it when the user asks why you think
    something, where you got it, or how you know it, in any language.
    """
    if ctx.memory is None:
        raise ToolError("Memory is unavailable right now.")
    recalled = await ctx.memory.recalled(ctx.run)
    if not recalled:
        return "No remembered things were given to you in this conversation lately."
    now = time.time()
    # Worded for everyone who reads this conversation: a memory from elsewhere keeps its
    # author and place to itself (agent/provenance.py).
    lines = ["Remembered things given to you here lately, newest first:"]
    lines += [
        f"- [{m.id}] ({m.scope_label}) {m.text} — {learned(m, ctx.run, now)}" for m in recalled
    ]
    return "\n".join(lines)


@tool(category="memory")
async def forget(ctx: ToolContext, memory_id: str) -> str:
    """Forget one remembered thing, by the id shown in the list of things you remember.
    It is forgotten only after the user approves.

    Args:
        memory_id: The id of the memory to forget.
    """
    if ctx.memory is None:
        raise ToolError("Memory is unavailable right now.")
    found = await ctx.memory.removable(ctx.run, memory_id)
    if found is None:
        raise ToolError(f"No memory with id {memory_id!r} that this user wrote is visible here.")
    if not ctx.approved:
        # Dropping what a person set up is their decision, whoever's text asked for it (a
        # file, a thread, a trigger's body), said with Approve on a prompt that quotes the
        # memory (an id alone tells them nothing). Only memories readable here are
        # removable, so a private one is never quoted into a shared chat.
        raise ApprovalRequired(f"Forget the {found.scope_label} memory “{found.text}”")
    if not await ctx.memory.forget(ctx.run, memory_id):
        raise ToolError(f"Memory {memory_id!r} is already gone.")
    return f"Forgot memory {memory_id}."


def _due_at(in_seconds: int | None, at: str | None, now: float) -> float:
    if (in_seconds is None) == (at is None):
        raise ToolError("Give exactly one of in_seconds or at.")
    if in_seconds is not None:
        return now + in_seconds
    assert at is not None
    try:
        moment = datetime.fromisoformat(at)
    except ValueError:
        raise ToolError(f"{at!r} is not an ISO-8601 time like 2026-05-01T09:30:00+02:00.") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)  # documented: a time without offset is UTC
    due = moment.timestamp()
    if due <= now:
        raise ToolError("That time is in the past.")
    if due - now > MAX_REMINDER_DELAY:
        raise ToolError("Reminders can be at most a year ahead.")
    return due


def _describe_reminder(args: dict[str, Any]) -> str:
    text = str(args.get("text", ""))
    if args.get("in_seconds") is not None:
        seconds = int(args["in_seconds"])
        when = f"in {seconds // 60} min" if seconds >= 60 else f"in {seconds} s"
    else:
        when = f"at {args.get('at')}"
    return f'Post a reminder {when}: "{text[:120]}"'


@tool(category="reminders", side_effects=True, retries=0, describe=_describe_reminder)
async def create_reminder(
    ctx: ToolContext,
    text: str,
    in_seconds: Annotated[int, Field(gt=0, le=MAX_REMINDER_DELAY)] | None = None,
    at: str | None = None,
) -> str:
    """Post a reminder into this conversation later. Give in_seconds or at, not both.

    Args:
        text: What to remind about.
        in_seconds: Delay from now, in seconds.
        at: ISO-8601 time, e.g. 2026-05-01T09:30:00+02:00 (UTC if no offset).
    """
    if ctx.scheduler is None:
        raise ToolError("Reminders are not available here.")
    due = _due_at(in_seconds, at, time.time())
    reminder_id = await ctx.scheduler.schedule_reminder(text, due, ctx.run)
    when = datetime.fromtimestamp(due, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"Reminder {reminder_id} set for {when}."


@tool(category="general")
async def current_time(timezone: str | None = None) -> str:
    """The current date and time.

    Args:
        timezone: An IANA time zone such as Europe/Berlin; UTC if not given.
    """
    try:
        zone = ZoneInfo(timezone) if timezone else UTC
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(f"Unknown time zone {timezone!r}; use an IANA name.") from None
    now = datetime.now(zone)
    return now.strftime("%A %Y-%m-%d %H:%M:%S %Z (UTC%z)")


@tool(category="general")
async def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression exactly: + - * / // % ** and parentheses,
    plus abs, round, min, max, sqrt, log, exp, sin, cos, tan, pi and e.

    Args:
        expression: For example "(1200 * 1.19) / 3" or "sqrt(2) ** 2".
    """
    try:
        return evaluate(expression)
    except CalculatorError as exc:
        raise ToolError(str(exc)) from None


BUILTIN_TOOLS: tuple[Tool, ...] = (
    ask_user,
    propose_plan,
    remember,
    list_memories,
    memory_sources,
    forget,
    create_reminder,
    current_time,
    calculator,
    *schedule_tools(DEFAULT_MIN_INTERVAL),
)


def builtin_registry(schedule_min_interval: float = DEFAULT_MIN_INTERVAL) -> ToolRegistry:
    """A fresh registry holding the built-in tools; add third-party ones to it. Schedules
    may run at most once every `schedule_min_interval` seconds."""
    if schedule_min_interval == DEFAULT_MIN_INTERVAL:
        return ToolRegistry(BUILTIN_TOOLS)
    timed = schedule_tools(schedule_min_interval)
    names = {item.name for item in timed}
    return ToolRegistry([*(t for t in BUILTIN_TOOLS if t.name not in names), *timed])


__all__ = ["BUILTIN_TOOLS", "builtin_registry"]
