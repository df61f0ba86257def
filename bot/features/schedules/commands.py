"""`/schedules` (Slack: `/parley schedules`): the conversation's schedules, each with its next
run and owner, and **Pause** / **Resume** / **Delete** buttons that only the owner and the
approvers may use. A press answers the presser and shows the list again as it now is.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from adapters.base import Actor, Button, InboundAction, OutboundMessage
from agent.recurrence import local_time, zone_of
from bot.conversation import effects as fx
from bot.conversation.running import Reply
from bot.conversation.seam import Acting, Handler
from bot.conversation.texts import (
    NO_SCHEDULES,
    SCHEDULE_DONE,
    SCHEDULE_GONE,
    SCHEDULE_NOT_YOURS,
)
from bot.features.schedules.store import Schedule, ScheduleStore

log = logging.getLogger(__name__)

SCHEDULE_ACTION = "sched"  # the decision id of the buttons under a list of schedules
WITH_BUTTONS = 12  # schedules listed with buttons (Slack allows 25 buttons in a block)


@dataclass(frozen=True, kw_only=True)
class ScheduleCommands:
    """/schedules and the buttons under its list: a feature of the executor (seam.py)."""

    store: ScheduleStore

    def handlers(self) -> Mapping[type, Handler]:
        return {fx.ListSchedules: self._list, fx.ScheduleButton: self._pressed}

    async def _list(self, acting: Acting, effect: fx.ListSchedules) -> None:
        await acting.reply.send(await self.listing(acting.reply.conversation.id), "reply")

    async def _pressed(self, acting: Acting, effect: fx.ScheduleButton) -> None:
        assert isinstance(acting.event, InboundAction)
        await acting.notify(await self.press(acting.event, acting.reply), False)

    async def listing(self, conversation_id: str) -> OutboundMessage:
        found = await self.store.in_chat(conversation_id)
        if not found:
            return OutboundMessage(text=NO_SCHEDULES)
        lines = ["Schedules here:"]
        buttons: list[Button] = []
        for index, (item, next_run) in enumerate(found, start=1):
            lines.append(f"{index}. {_line(item, next_run)}")
            if index > WITH_BUTTONS:
                continue
            if item.state == "active":
                buttons.append(Button(label=f"Pause {index}", value=f"pause-{item.id}"))
            else:
                buttons.append(Button(label=f"Resume {index}", value=f"resume-{item.id}"))
            buttons.append(
                Button(label=f"Delete {index}", value=f"delete-{item.id}", style="danger")
            )
        return OutboundMessage(
            text="\n".join(lines), buttons=tuple(buttons), decision_id=SCHEDULE_ACTION
        )

    async def pressed(self, conversation_id: str, actor: Actor, choice: str) -> tuple[str, bool]:
        """What a press did, for the presser, and whether the list changed."""
        verb, _, schedule_id = choice.partition("-")
        found = await self.store.get(schedule_id)
        if found is None or not found.lives_in(conversation_id) or verb not in SCHEDULE_DONE:
            return SCHEDULE_GONE, False
        if not self.store.may_manage(found, actor.user_id, actor.groups):
            return SCHEDULE_NOT_YOURS.format(owner=found.owner_name or found.owner_id), False
        if verb == "pause" and found.state == "active":
            await self.store.pause(found, note=f"paused by {actor.name or actor.user_id}")
        elif verb == "resume" and found.state == "paused":
            await self.store.resume(found)
        elif verb == "delete":
            await self.store.delete(found)
        return SCHEDULE_DONE[verb].format(id=found.id), True

    async def press(self, action: InboundAction, reply: Reply) -> str:
        """A button press: what it did, and the list shown again if it changed."""
        text, changed = await self.pressed(action.conversation.id, action.actor, action.choice)
        if changed and action.message is not None:
            listing = await self.listing(action.conversation.id)
            try:
                await reply.edit(action.message, listing, "refresh")
            except Exception:
                log.warning("could not show the schedules again in %s", action.conversation.id)
        return text


def _line(item: Schedule, next_run: float | None) -> str:
    upcoming = local_time(next_run, zone_of(item.timezone)) if next_run else "—"
    state = "" if item.state == "active" else f" — paused{f' ({item.note})' if item.note else ''}"
    return (
        f"“{item.objective[:120]}” · {item.when} ({item.timezone}) · next {upcoming} · "
        f"owner {item.owner_name or item.owner_id} · id {item.id}{state}"
    )
