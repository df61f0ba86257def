"""The schedule tools: `schedule(when, objective, timezone=None)`, `list_schedules()` and
`cancel_schedule(id)`.

Making a schedule changes the world, so it waits for **Approve**; the prompt shows the next
three runs in the owner's zone, what will run, where, and any tools allowed to act without
asking again. A `when` that is invalid or runs more often than the minimum interval is not
put to the user at all: the call is refused at once, naming the minimum.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from agent.protocols import RunContext, ScheduleBook, ScheduleInfo, ScheduleRefused
from agent.recurrence import RecurrenceError, check, local_time, zone_of
from agent.standing import bound, permitted
from agent.tools import ApprovalRequired, Tool, ToolContext, ToolError, tool

DEFAULT_MIN_INTERVAL = 60.0
# Tools a standing permission may never cover: a schedule must not make or drop schedules
# on its own.
NEVER_STANDING = frozenset({"schedule", "cancel_schedule"})


def owner_zone(timezone: str | None, context: RunContext | None) -> str:
    """The zone a schedule runs in, the owner's: their platform's (Slack's profile `tz`),
    else the one they named, else UTC."""
    return (context.timezone if context else None) or timezone or "UTC"


def where(context: RunContext | None) -> str:
    if context is None:
        return "this conversation"
    if context.is_direct:
        return "this direct chat"
    place = "this thread" if context.conversation_id.rsplit(":", 1)[-1] != "-" else "this chat"
    return place


def _book(ctx: ToolContext) -> ScheduleBook:
    if not isinstance(ctx.scheduler, ScheduleBook):
        raise ToolError("Schedules are not available here.")
    return ctx.scheduler


def _standing(allow_tools: list[str] | None, shown: Mapping[str, str]) -> tuple[str, ...]:
    """The permissions, each bound to its tool as shown now: a tool changed later is asked."""
    names = tuple(dict.fromkeys(name.strip() for name in allow_tools or () if name.strip()))
    refused = NEVER_STANDING.intersection(names)
    if refused:
        raise ToolError(f"{', '.join(sorted(refused))} always needs approval; leave it out.")
    return tuple(bound(name, shown.get(name)) for name in names)


def schedule_tools(min_interval: float = DEFAULT_MIN_INTERVAL) -> tuple[Tool, Tool, Tool]:
    """The three tools, refusing schedules that run more often than `min_interval` seconds."""

    def refusal(args: dict[str, Any], context: RunContext | None = None) -> str | None:
        try:
            check(
                str(args.get("when", "")),
                owner_zone(args.get("timezone"), context),
                min_interval,
                time.time(),
            )
        except RecurrenceError as exc:
            return str(exc)
        return None

    def needs_approval(args: dict[str, Any]) -> bool:
        # A refused schedule needs nobody's yes: the call only says why not.
        return refusal(args) is None

    def describe(args: dict[str, Any], context: RunContext | None) -> str:
        # One line the approval prompt shows under the arguments (kept within its 200
        # characters): where, in which zone, the next three runs, what may act unasked.
        zone_name = owner_zone(args.get("timezone"), context)
        recurrence = check(str(args["when"]), zone_name, min_interval, time.time())
        zone = zone_of(zone_name)
        now = time.time()
        times = ", ".join(
            datetime.fromtimestamp(t, zone).strftime("%a %d %b %H:%M:%S %Z")
            for t in recurrence.upcoming(now, zone, now, 3)
        )
        line = f"Runs in {where(context)}, time zone {zone_name}; next: {times}."
        if allowed := [str(name) for name in args.get("allow_tools") or () if name]:
            return f"{line} May act without asking: {', '.join(allowed)}."
        return f"{line} Side effects ask each time."

    @tool(category="schedules", side_effects=needs_approval, retries=0, describe=describe)
    async def schedule(
        ctx: ToolContext,
        when: str,
        objective: str,
        timezone: str | None = None,
        allow_tools: list[str] | None = None,
    ) -> str:
        """Run an objective again and again in this conversation, as this user, e.g. "every
        weekday at 9 summarise #support". The user approves it first.

        Args:
            when: A 5-field cron expression (minute hour day month weekday, e.g. "0 9 * * 1-5")
                or "every <N> seconds|minutes|hours|days".
            objective: What to do at each run, as a self-contained instruction.
            timezone: The user's IANA zone if they named it (e.g. Europe/Berlin); where the
                platform knows their zone (Slack), that one is used.
            allow_tools: Side-effecting tools the user wants to run in these runs without
                being asked each time (only if they said so).
        """
        book = _book(ctx)
        zone_name = owner_zone(timezone, ctx.run)
        if why := refusal({"when": when, "timezone": timezone}, ctx.run):
            raise ToolError(why)
        try:
            made = await book.create_schedule(
                when, objective, zone_name, _standing(allow_tools, ctx.shown), ctx.run
            )
        except ScheduleRefused as exc:
            raise ToolError(str(exc)) from None
        return f"Schedule created. {render(made)}"

    @tool(category="schedules")
    async def list_schedules(ctx: ToolContext) -> str:
        """List this conversation's schedules with their ids, next run, owner and state."""
        found = await _book(ctx).list_schedules(ctx.run)
        if not found:
            return "No schedules in this conversation."
        return "\n".join(f"- {render(item)}" for item in found)

    @tool(category="schedules")
    async def cancel_schedule(ctx: ToolContext, id: str) -> str:
        """Delete one of this conversation's schedules for good: no later run happens, not
        even one already due. Use the id from list_schedules. The user approves it first.

        Args:
            id: The schedule's id.
        """
        book = _book(ctx)
        try:
            found = await book.cancellable(id.strip(), ctx.run)
            if not ctx.approved:
                # What a person set up goes only with a yes, whoever's text asked (a trigger's
                # body, a thread, a file): the prompt names the schedule, not just its id.
                owner = found.owner_name or found.owner_id
                raise ApprovalRequired(
                    f"Cancel {owner}'s schedule {found.id} ({found.when}, {found.timezone}): "
                    f"“{found.objective[:200]}”"
                )
            gone = await book.cancel_schedule(id.strip(), ctx.run)
        except ScheduleRefused as exc:
            raise ToolError(str(exc)) from None
        return f"Cancelled schedule {gone.id} ({gone.when}: {gone.objective[:80]})."

    return schedule, list_schedules, cancel_schedule


def render(item: ScheduleInfo) -> str:
    zone = zone_of(item.timezone)
    upcoming = local_time(item.next_run, zone) if item.next_run else "not scheduled"
    state = f"paused ({item.note})" if item.state == "paused" and item.note else item.state
    allowed = ", ".join(permitted(entry) for entry in item.standing)
    extra = f"; may act without asking: {allowed}" if item.standing else ""
    return (
        f"id: {item.id} — {item.when} ({item.timezone}), {state}, next run {upcoming}, "
        f"owner {item.owner_name or item.owner_id}: “{item.objective[:200]}”{extra}"
    )
